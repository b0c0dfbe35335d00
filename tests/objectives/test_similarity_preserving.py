"""SimilarityPreservingLoss against values worked out by hand."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from modsenc.objectives.losses.similarity_preserving import SimilarityPreservingLoss
from modsenc.objectives.sentence_pairs import SentencePairExample, SentencePairObjective


def _at_angles(degrees: list[float]) -> torch.Tensor:
    radians = [math.radians(d) for d in degrees]
    return torch.tensor([[math.cos(r), math.sin(r)] for r in radians])


def test_loss_is_the_mean_of_one_minus_each_rows_correlation() -> None:
    # Teacher at 0, 90, 180, 270 degrees, student at 0, 60, 120, 180. Each row's cosines to the
    # other three sentences:
    #   row 0: teacher (0, -1, 0),  student (0.5, -0.5, -1)  -> corr 1/(2 sqrt 7)
    #   row 1: teacher (0, 0, -1),  student (0.5, 0.5, -0.5) -> centred both are (1, 1, -2)/3: corr 1
    #   row 2: teacher (-1, 0, 0),  student (-0.5, 0.5, 0.5) -> centred both are (-2, 1, 1)/3: corr 1
    #   row 3: teacher (0, -1, 0),  student (-1, -0.5, 0.5)  -> corr 1/(2 sqrt 7)
    # Row 0 centred: (1, -2, 1)/3 and (5, -1, -4)/6; dot 1/6, norms sqrt(2/3) and sqrt(7/6).
    # L = (2 (1 - 1/(2 sqrt 7)) + 0 + 0) / 4 = 1/2 - 1/(4 sqrt 7) = 0.405509...
    teacher, student = _at_angles([0, 90, 180, 270]), _at_angles([0, 60, 120, 180])
    expected = 0.5 - 1 / (4 * math.sqrt(7))
    assert SimilarityPreservingLoss()(student, teacher).item() == pytest.approx(expected, abs=1e-6)


def test_loss_ignores_each_spaces_level_and_scale_and_rotation() -> None:
    teacher = torch.randn(6, 8, generator=torch.Generator().manual_seed(0))
    rotation, _ = torch.linalg.qr(torch.randn(8, 8, generator=torch.Generator().manual_seed(1)))
    # rotated and rescaled: every cosine is the same, so the loss is 0
    assert SimilarityPreservingLoss()(3.0 * teacher @ rotation, teacher).item() == pytest.approx(
        0.0, abs=1e-6
    )
    # a shared direction added to every vector raises every cosine; the loss sees what it does to
    # each row's ordering, far less than the raw cosines' change
    shifted = teacher + 4.0 * torch.ones(8)
    assert SimilarityPreservingLoss()(shifted, teacher).item() < 0.5
    # with three sentences a row has two neighbours, so its correlation is +1 (same order) or -1
    # (flipped): L = 2 x (flipped rows) / 3. Teacher at 0, 30, 90 degrees, student at 0, 60, 90:
    #   row 0: teacher (cos 30, cos 90) falls, student (cos 60, cos 90) falls: kept
    #   row 1: teacher (cos 30, cos 60) falls, student (cos 60, cos 30) rises: flipped
    #   row 2: teacher (cos 90, cos 60) rises, student (cos 90, cos 30) rises: kept
    teacher3, student3 = _at_angles([0, 30, 90]), _at_angles([0, 60, 90])
    assert SimilarityPreservingLoss()(student3, teacher3).item() == pytest.approx(2 / 3, abs=1e-6)


def test_gradient_reaches_the_student_only_and_small_batches_are_refused() -> None:
    student = torch.randn(5, 4, requires_grad=True)
    teacher = torch.randn(5, 4, requires_grad=True)
    SimilarityPreservingLoss()(student, teacher).backward()
    assert student.grad is not None and student.grad.norm() > 0 and teacher.grad is None
    with pytest.raises(ValueError, match="at least 3"):
        SimilarityPreservingLoss()(torch.randn(2, 4), torch.randn(2, 4))
    with pytest.raises(ValueError, match="differ"):
        SimilarityPreservingLoss()(torch.randn(4, 4), torch.randn(4, 3))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_loss_is_computed_in_fp32_under_bf16_autocast(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    teacher, student = _at_angles([0, 90, 180, 270]), _at_angles([0, 60, 120, 180])
    with torch.autocast(device, dtype=torch.bfloat16):
        loss = SimilarityPreservingLoss()(student.to(device), teacher.to(device))
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(0.5 - 1 / (4 * math.sqrt(7)), abs=1e-6)


def test_objective_adds_the_weighted_structure_term_to_distill_batches() -> None:
    # the students are the hand-computed test's student, on their own pivots (regression 0)
    students, teacher = _at_angles([0, 60, 120, 180]), _at_angles([0, 90, 180, 270])
    objective = SentencePairObjective(scale=1.0, structure_weight=2.0)
    loss, terms = objective.distill_loss(students, students, None, teacher)
    expected = 0.5 - 1 / (4 * math.sqrt(7))
    assert terms["distill_regression"] == pytest.approx(0.0, abs=1e-6)
    assert terms["distill_structure"] == pytest.approx(expected, abs=1e-6)
    assert loss.item() == pytest.approx(2.0 * expected, abs=1e-6)
    assert objective.config_dict()["distill_structure_weight"] == 2.0
    with pytest.raises(ValueError, match="structure_vector"):
        objective.distill_loss(students, students)
    with pytest.raises(ValueError, match="structure_weight must be >= 0"):
        SentencePairObjective(structure_weight=-1.0)


def test_collate_carries_structure_vectors_and_refuses_a_mixed_batch() -> None:
    backbone = SimpleNamespace(position_offset=0)
    pivot, own = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    with_structure = SentencePairExample("distill", [5, 6], anchor_vector=pivot, structure_vector=own)
    batch = SentencePairObjective().collate([with_structure] * 3, np.random.default_rng(0), backbone)
    assert batch.structure_vectors.tolist() == [[0.0, 1.0]] * 3
    without = SentencePairExample("distill", [5, 6], anchor_vector=pivot)
    with pytest.raises(ValueError, match="mix pairs with and without a structure_vector"):
        SentencePairObjective().collate([with_structure, without], np.random.default_rng(0), backbone)
    with pytest.raises(ValueError, match="only distill pairs"):
        SentencePairExample("parallel", [5], anchor_vector=pivot, structure_vector=own)
