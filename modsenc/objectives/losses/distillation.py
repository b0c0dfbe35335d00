"""Multilingual knowledge distillation onto a frozen teacher (Reimers and Gurevych, 2020; LASER3).

    L = 1/N Σ_i || ŝ_i - t_i ||²,      ŝ_i = s_i / ||s_i||

``s_i`` is the student's vector of a sentence in the new language (the backbone with the
language's modules), ``t_i`` the fixed target: the frozen backbone's unit vector of its English
translation, or a blend ``(t_en + λ t_xx) / (1 + λ)`` with the backbone's own unit vector of the
sentence, which keeps its monolingual neighbourhood. Regressing onto the blend is the same, up to a
constant that has no gradient, as ``(||ŝ - t_en||² + λ ||ŝ - t_xx||²) / (1 + λ)``, so one target
vector per sentence carries both terms.

The student is L2-normalised (unlike the paper's MSE on raw vectors) because every use downstream
is a cosine, and so that the loss sits on the scale of MNRL's when the two alternate in one
stage: ``||ŝ - t||² = 2 - 2 cos(s, t)`` for a unit ``t``, in [0, 4]. Unlike ``CosineSimilarityLoss``
(``(1 - cos)²``), its gradient does not vanish as the student approaches the teacher.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from modsenc.backbone.precision import full_precision


class DistillationLoss(nn.Module):
    def forward(self, student: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if student.shape != target.shape:
            raise ValueError(f"student {tuple(student.shape)} and target {tuple(target.shape)} differ")
        with full_precision(student):
            unit = F.normalize(student.float(), dim=-1)
            return (unit - target.float()).pow(2).sum(-1).mean()


def distillation_targets(
    translation: torch.Tensor, own: torch.Tensor | None = None, own_weight: float = 0.0
) -> torch.Tensor:
    """Unit teacher vectors of the translations, blended with weight ``own_weight`` (λ) with the
    teacher's vectors of the sentences themselves: ``(t_en + λ t_xx) / (1 + λ)``."""
    if own_weight < 0:
        raise ValueError(f"the weight of the sentence's own vector must be >= 0, got {own_weight}")
    target = F.normalize(translation.float(), dim=-1)
    if own_weight == 0:
        return target
    if own is None:
        raise ValueError("own_weight > 0 needs the teacher's vectors of the sentences themselves")
    return (target + own_weight * F.normalize(own.float(), dim=-1)) / (1 + own_weight)
