"""DistillationLoss and its targets, against values worked out by hand."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from modsenc.objectives.losses.distillation import DistillationLoss, distillation_targets
from modsenc.objectives.sentence_pairs import SentencePairExample, SentencePairObjective


def test_loss_is_the_mean_squared_distance_of_the_unit_student_to_the_target() -> None:
    student = torch.tensor([[3.0, 4.0], [1.0, 0.0]])  # unit: (0.6, 0.8) and (1, 0)
    target = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # (0.6-1)^2 + 0.8^2 = 0.8 ; (1-0)^2 + (0-1)^2 = 2 ; mean 1.4
    assert DistillationLoss()(student, target).item() == pytest.approx(1.4)


def test_loss_is_zero_on_the_target_and_its_gradient_does_not_vanish_near_it() -> None:
    target = torch.tensor([[0.6, 0.8]])
    assert DistillationLoss()(torch.tensor([[6.0, 8.0]]), target).item() == pytest.approx(0.0, abs=1e-7)
    near = torch.tensor([[0.62, 0.78]], requires_grad=True)
    DistillationLoss()(near, target).backward()
    assert near.grad.norm() > 0.01  # (1 - cos)^2 would give ~1e-4 here


def test_targets_blend_the_translation_and_the_sentence_itself() -> None:
    translation, own = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 3.0]])
    assert distillation_targets(translation).tolist() == [[1.0, 0.0]]
    blend = distillation_targets(translation, own, own_weight=1.0)
    assert blend.tolist() == [[0.5, 0.5]]
    # Regressing onto the blend = the weighted sum of both terms, less a constant (here 0.5):
    student = torch.tensor([[0.6, 0.8]])
    to_blend = DistillationLoss()(student, blend).item()  # 0.1^2 + 0.3^2 = 0.1
    both = (0.8 + 1.0 * 0.4) / 2  # ||s - (1,0)||^2 = 0.8, ||s - (0,1)||^2 = 0.4
    assert to_blend == pytest.approx(0.1)
    assert both - to_blend == pytest.approx(0.5)
    with pytest.raises(ValueError, match="needs the teacher's vectors"):
        distillation_targets(translation, None, own_weight=0.5)
    with pytest.raises(ValueError, match=">= 0"):
        distillation_targets(translation, own, own_weight=-1)


def test_loss_is_computed_in_fp32_under_bf16_autocast() -> None:
    student = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    target = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = DistillationLoss()(student, target)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(1.4, abs=1e-6)


def test_objective_names_the_distill_loss() -> None:
    assert SentencePairObjective().config_dict()["distill_loss"] == "DistillationLoss"


def test_ranking_term_is_the_symmetric_in_batch_cross_entropy_by_hand() -> None:
    pivots = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    students = torch.tensor([[0.6, 0.8], [0.0, 1.0]])
    # cosines pivot i . student j: [[0.6, 0.0], [0.8, 1.0]]; scale 1.
    # pivot -> student rows: log(1 + e^-0.6) = 0.43749, log(1 + e^-0.2) = 0.59814
    # student -> pivot rows: log(1 + e^0.2) = 0.79814, log(1 + e^-1) = 0.31326
    forward = (math.log(1 + math.exp(-0.6)) + math.log(1 + math.exp(-0.2))) / 2
    backward = (math.log(1 + math.exp(0.2)) + math.log(1 + math.exp(-1.0))) / 2
    ranking = (forward + backward) / 2
    assert ranking == pytest.approx(0.53676, abs=1e-5)
    regression = 0.8 / 2  # ||(0.6, 0.8) - (1, 0)||^2 = 0.8, the second student is on its pivot
    plain = SentencePairObjective(scale=1.0)
    assert plain.distill_loss(students, pivots)[0].item() == pytest.approx(regression)
    ranked = SentencePairObjective(scale=1.0, ranking_weight=0.5)
    assert ranked.distill_loss(students, pivots)[0].item() == pytest.approx(
        regression + 0.5 * ranking, abs=1e-6
    )
    # The regression may aim elsewhere (a blended target); the ranking still uses the pivots:
    targets = torch.tensor([[0.6, 0.8], [0.0, 1.0]])
    assert ranked.distill_loss(students, pivots, targets)[0].item() == pytest.approx(0.5 * ranking, abs=1e-6)
    with pytest.raises(ValueError, match="ranking_weight must be >= 0"):
        SentencePairObjective(ranking_weight=-0.1)


def test_ranking_margin_and_hard_negatives_by_hand() -> None:
    pivots = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    students = torch.tensor([[0.6, 0.8], [0.0, 1.0]])
    regression = 0.8 / 2
    m = 0.5
    # cosines pivot i . student j: [[0.6, 0.0], [0.8, 1.0]], scale 1; the margin comes off the diagonal.
    forward = (math.log(1 + math.exp(-0.6 + m)) + math.log(1 + math.exp(-0.2 + m))) / 2
    backward = (math.log(1 + math.exp(0.2 + m)) + math.log(1 + math.exp(-1.0 + m))) / 2
    margin = SentencePairObjective(scale=1.0, ranking_weight=1.0, ranking_margin=m)
    assert margin.distill_loss(students, pivots)[0].item() == pytest.approx(
        regression + (forward + backward) / 2, abs=1e-6
    )
    # A hard negative (1, 0) joins the students' candidates only: student 0's candidates are the
    # pivots at 0.6 - m and 0.8 and the negative at 0.6; student 1's: 0.0, 1.0 - m and 0.0.
    negatives = torch.tensor([[1.0, 0.0]])
    student_side = (
        math.log(math.exp(0.6 - m) + math.exp(0.8) + math.exp(0.6)) - (0.6 - m)
        + math.log(math.exp(0.0) + math.exp(1.0 - m) + math.exp(0.0)) - (1.0 - m)
    ) / 2  # fmt: skip
    pivot_side = (  # each pivot ranked against the two students, as without negatives
        math.log(math.exp(0.6 - m) + math.exp(0.0)) - (0.6 - m)
        + math.log(math.exp(0.8) + math.exp(1.0 - m)) - (1.0 - m)
    ) / 2  # fmt: skip
    loss, terms = margin.distill_loss(students, pivots, negatives=negatives)
    assert terms["distill_ranking"] == pytest.approx((student_side + pivot_side) / 2, abs=1e-6)
    assert loss.item() == pytest.approx(regression + (student_side + pivot_side) / 2, abs=1e-6)
    with pytest.raises(ValueError, match="hard negatives need ranking_weight > 0"):
        SentencePairObjective(scale=1.0).distill_loss(students, pivots, negatives=negatives)
    with pytest.raises(ValueError, match="ranking_margin must be >= 0"):
        SentencePairObjective(ranking_margin=-0.1)


def test_collate_stacks_each_pairs_hard_negatives() -> None:
    pivot, backbone = torch.tensor([1.0, 0.0]), SimpleNamespace(position_offset=0)
    negatives = [torch.tensor([[0.0, 1.0]]), torch.zeros(0, 2), torch.tensor([[2.0, 2.0]])]
    pairs = [
        SentencePairExample("distill", ids, anchor_vector=pivot, negative_vectors=v)
        for ids, v in zip([[5, 6], [7], [8]], negatives)
    ]
    batch = SentencePairObjective().collate(pairs, np.random.default_rng(0), backbone)
    assert batch.negative_vectors.tolist() == [[0.0, 1.0], [2.0, 2.0]]
    plain = SentencePairExample("distill", [8, 9], anchor_vector=pivot)
    with pytest.raises(ValueError, match="must not mix pairs with and without negative_vectors"):
        SentencePairObjective().collate([pairs[0], plain], np.random.default_rng(0), backbone)
    with pytest.raises(ValueError, match="only distill pairs take a target, structure or negative vectors"):
        SentencePairExample("parallel", [5], anchor_vector=pivot, negative_vectors=torch.ones(1, 2))


def test_collate_carries_distill_targets_apart_from_the_pivot_vectors() -> None:
    pivot, target = torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.5])
    backbone = SimpleNamespace(position_offset=0)
    pairs = [
        SentencePairExample("distill", [5, 6, 7], anchor_vector=pivot, target_vector=target),
        SentencePairExample("distill", [8, 9], anchor_vector=pivot * 2, target_vector=target * 2),
    ]
    batch = SentencePairObjective().collate(pairs, np.random.default_rng(0), backbone)
    assert batch.anchor_vectors.tolist() == [[1.0, 0.0], [2.0, 0.0]]
    assert batch.target_vectors.tolist() == [[0.5, 0.5], [1.0, 1.0]]
    plain = SentencePairExample("distill", [8, 9], anchor_vector=pivot)
    assert SentencePairObjective().collate([plain], np.random.default_rng(0), backbone).target_vectors is None
    with pytest.raises(ValueError, match="must not mix pairs with and without a target_vector"):
        SentencePairObjective().collate([pairs[0], plain], np.random.default_rng(0), backbone)
    with pytest.raises(ValueError, match="only distill pairs take a target, structure or negative vectors"):
        SentencePairExample("parallel", [5], anchor_vector=pivot, target_vector=target)
