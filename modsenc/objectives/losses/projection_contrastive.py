"""EMS's sentence-level contrastive loss: symmetric in-batch InfoNCE on the cosine of a 2-layer
MLP projection (d → d → 128, ReLU), T = 0.1. The projection is used for training only; inference
uses the pooled d-dimensional vector."""

from __future__ import annotations

import torch
from torch import nn

from modsenc.objectives.losses.infonce_alignment import InfoNCEAlignmentLoss


class ProjectionContrastiveLoss(nn.Module):
    def __init__(self, hidden_size: int, projection_dim: int = 128, temperature: float = 0.1) -> None:
        super().__init__()
        self.projection = nn.Sequential(
            nn.Linear(hidden_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, projection_dim)
        )
        self.infonce = InfoNCEAlignmentLoss(temperature)

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Mean over pairs of ℓ(u_i → v) + ℓ(v_i → u): the two directions are *summed*, as EMS sums
        its two KL terms, so (L_XTR + L_cntrs) / |B| weighs them alike."""
        return 2 * self.infonce(self.projection(u), self.projection(v))
