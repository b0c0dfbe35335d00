"""EMMA-X's semantic-relation classifier (Guo et al., NeurIPS 2023): a Gaussian mixture over the
difference z = γ(x) − γ(y) of two L2-normalised sentence vectors, one diagonal Gaussian per
semantic rank r = 1..N (1 = translations, N = unrelated), with learnable weights π, means μ and
standard deviations σ:

    P_G(r | x, y) = π_r N(z; μ_r, diag σ_r²) / Σ_k π_k N(z; μ_k, diag σ_k²)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class GaussianMixtureRelation(nn.Module):
    def __init__(self, dim: int, ranks: int = 4) -> None:
        super().__init__()
        if ranks < 2:
            raise ValueError(f"a relation classifier needs at least 2 ranks, got {ranks}")
        self.ranks = ranks
        self.pi_logits = nn.Parameter(torch.zeros(ranks))  # π = softmax(pi_logits): always a distribution
        self.mu = nn.Parameter(torch.zeros(ranks, dim))
        # Rank r starts with σ_r = (r / N) · sqrt(2 / d): sqrt(2/d) is the per-coordinate spread of the
        # difference of two independent unit vectors (rank N), and closer ranks start tighter, so the
        # untrained posterior already orders pairs by distance.
        sigma = torch.arange(1, ranks + 1, dtype=torch.float) / ranks * math.sqrt(2.0 / dim)
        self.log_sigma = nn.Parameter(sigma.log()[:, None].repeat(1, dim))

    @torch.no_grad()
    def fit_moments(
        self,
        z: torch.Tensor,
        ranks: torch.Tensor,
        only: torch.Tensor | None = None,
        min_sigma: float = 1e-4,
    ) -> torch.Tensor:
        """Set μ_r and σ_r of every rank present in ``ranks`` (0-based; of those in the bool mask
        ``only`` if given) to the mean and standard deviation of its items: the maximum-likelihood
        estimate on these labelled differences. Returns which ranks were set."""
        present = torch.zeros(self.ranks, dtype=torch.bool, device=z.device)
        for rank in range(self.ranks):
            items = z[ranks == rank].float()
            if items.shape[0] == 0 or (only is not None and not bool(only[rank])):
                continue
            self.mu[rank] = items.mean(0)
            spread = items.std(0, unbiased=False) if items.shape[0] > 1 else torch.full_like(items[0], 1.0)
            self.log_sigma[rank] = spread.clamp_min(min_sigma).log()
            present[rank] = True
        return present

    @torch.no_grad()
    def track_moments(
        self, z: torch.Tensor, ranks: torch.Tensor, momentum: float, min_sigma: float = 1e-4
    ) -> torch.Tensor:
        """Move μ_r and σ_r² of every rank with at least two items in ``ranks`` (0-based) toward the
        mean and variance of its items: μ ← m·μ + (1−m)·mean, σ² ← m·σ² + (1−m)·var (an online
        M-step on labelled differences). Gradient steps at a fine-tuning learning rate move μ and
        log σ by about that rate per step, so without this the Gaussians stay where the first batch
        put them while the encoder moves the differences away. Returns which ranks were moved."""
        moved = torch.zeros(self.ranks, dtype=torch.bool, device=z.device)
        for rank in range(self.ranks):
            items = z[ranks == rank].float()
            if items.shape[0] < 2:
                continue
            mean = items.mean(0)
            var = items.var(0, unbiased=False).clamp_min(min_sigma**2)
            self.mu[rank] = momentum * self.mu[rank] + (1 - momentum) * mean
            old_var = torch.exp(2 * self.log_sigma[rank])
            self.log_sigma[rank] = 0.5 * (momentum * old_var + (1 - momentum) * var).log()
            moved[rank] = True
        return moved

    def log_joint(self, z: torch.Tensor) -> torch.Tensor:
        """log π_r + log N(z; μ_r, σ_r) for every rank: (..., dim) → (..., ranks)."""
        z = z.float()[..., None, :]
        log_sigma = self.log_sigma
        standardized = (z - self.mu) * torch.exp(-log_sigma)
        log_density = (
            -0.5 * standardized.pow(2).sum(-1) - log_sigma.sum(-1) - 0.5 * z.shape[-1] * math.log(2 * math.pi)
        )
        return F.log_softmax(self.pi_logits, dim=0) + log_density

    def log_posterior(self, z: torch.Tensor) -> torch.Tensor:
        """log P_G(r | x, y): (..., dim) → (..., ranks)."""
        return F.log_softmax(self.log_joint(z), dim=-1)

    def forward(self, z: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
        """Sum over items of −log P_G(rank | z), ranks 0-based (rank r of the paper is r − 1)."""
        return -self.log_posterior(z).gather(-1, ranks[..., None]).sum()
