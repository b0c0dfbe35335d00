"""MEXMA's sentence-level alignment: mean squared error between the two languages' vectors."""

from __future__ import annotations

import torch
from torch import nn


class MSEAlignmentLoss(nn.Module):
    """Returns the *sum* of squared errors and the element count, so that a data-parallel
    trainer can divide by the global count (``mean`` = sum / count on one process)."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, int]:
        if a.shape != b.shape:
            raise ValueError(f"alignment needs equal shapes, got {tuple(a.shape)} and {tuple(b.shape)}")
        return (a.float() - b.float()).pow(2).sum(), a.numel()
