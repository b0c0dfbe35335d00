"""Contrastive (InfoNCE) alignment, the MEXMA paper's ablation instead of MSE."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from modsenc.backbone.precision import full_precision


class InfoNCEAlignmentLoss(nn.Module):
    """Symmetric InfoNCE over cosine similarities: translation ``a[i]`` must pick ``b[i]`` among
    all ``b`` of the batch, and vice versa; the two cross-entropies are averaged."""

    def __init__(self, temperature: float = 0.05) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError("temperature must be positive")
        self.temperature = temperature

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with full_precision(a):  # the similarity matrix and softmax in fp32 under bf16 autocast
            logits = F.normalize(a.float(), dim=-1) @ F.normalize(b.float(), dim=-1).T / self.temperature
            target = torch.arange(a.shape[0], device=a.device)
            return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2
