"""Similarity-preserving distillation of a batch's geometry (Tung and Mori, 2019; Park et al.,
2019, relational knowledge distillation), in a form that ignores each space's offset and scale.

For a batch of N sentences, ``s_ij`` is the cosine of sentences i and j under the student (the
language's modules with the CLA) and ``t_ij`` under the teacher (the same sentences through the
modules without the CLA: what ``mode="mono"`` gives). For each sentence i, its similarities to the
batch's other sentences are compared by Pearson correlation:

    L = 1/N Σ_i (1 - corr_{j≠i}(s_ij, t_ij))

so each sentence keeps the teacher's ordering and spacing of its neighbours. Correlation, not the
squared difference of the cosines themselves, because the two spaces sit at different levels:
the SE spreads a language's sentences out (mean in-batch cosine 0.13 on Kardeş uz) while the
English pivot the CLA aligns onto is e5's (0.81). Matching raw cosines would pull the aligned
space away from English; matching each row's correlation asks only that the CLA keep which
sentences are nearer which, up to an affine map per row. L is 0 when the student's rows are the
teacher's up to a positive scale and shift (a rotation of the space, for one), and at most 2.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from modsenc.backbone.precision import full_precision


class SimilarityPreservingLoss(nn.Module):
    def __init__(self, eps: float = 1e-8) -> None:
        super().__init__()
        self.eps = eps  # keeps a row whose similarities are all equal from dividing by zero

    def forward(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        if student.shape != teacher.shape:
            raise ValueError(f"student {tuple(student.shape)} and teacher {tuple(teacher.shape)} differ")
        n = student.shape[0]
        if n < 3:  # with two neighbours or fewer a row's correlation is only ever -1 or +1
            raise ValueError(f"the similarity-preserving loss needs a batch of at least 3, got {n}")
        with full_precision(student):
            off_diagonal = ~torch.eye(n, dtype=torch.bool, device=student.device)
            rows_s = _cosines(student)[off_diagonal].view(n, n - 1)
            rows_t = _cosines(teacher.detach())[off_diagonal].view(n, n - 1)
            rows_s = rows_s - rows_s.mean(-1, keepdim=True)
            rows_t = rows_t - rows_t.mean(-1, keepdim=True)
            correlation = (rows_s * rows_t).sum(-1) / (rows_s.norm(dim=-1) * rows_t.norm(dim=-1) + self.eps)
            return (1 - correlation).mean()


def _cosines(vectors: torch.Tensor) -> torch.Tensor:
    unit = F.normalize(vectors.float(), dim=-1)
    return unit @ unit.T
