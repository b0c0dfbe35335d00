"""EMMA-X's rank-InfoNCE: a contrastive loss over candidates grouped by semantic rank.

For an anchor x with candidates y_j of ranks c_j (0-based, 0 = closest), each candidate of rank
r < N−1 is a positive against the candidates of rank ≥ r, at that rank's temperature τ_r:

    L = Σ_x Σ_{r<N−1} Σ_{j: c_j = r} −log exp(s(x, y_j)/τ_r) / Σ_{k: c_k ≥ r} exp(s(x, y_k)/τ_r)

With τ_1 < … < τ_N closer ranks are pulled harder. The last rank (unrelated) is never a positive:
it only serves as negatives (its own term would have no farther candidates to contrast with).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class RankInfoNCELoss(nn.Module):
    def __init__(self, temperatures: Sequence[float]) -> None:
        super().__init__()
        temperatures = [float(t) for t in temperatures]
        if len(temperatures) < 2 or any(t <= 0 for t in temperatures):
            raise ValueError(f"need at least two positive temperatures, got {temperatures}")
        if any(a >= b for a, b in zip(temperatures, temperatures[1:])):
            raise ValueError(
                f"rank temperatures must increase with the rank (τ_1 < … < τ_N), got {temperatures}"
            )
        self.temperatures = temperatures

    def forward(self, similarity: torch.Tensor, ranks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(sum of the terms, number of terms) for a (anchors, candidates) similarity matrix and the
        candidates' ranks; the count lets a data-parallel trainer divide by a global count."""
        if similarity.shape != ranks.shape:
            raise ValueError(
                f"similarity {tuple(similarity.shape)} and ranks {tuple(ranks.shape)} differ in shape"
            )
        total = similarity.new_zeros((), dtype=torch.float)
        count = torch.zeros((), dtype=torch.long, device=similarity.device)
        for rank, tau in enumerate(self.temperatures[:-1]):
            positive = ranks == rank
            logits = similarity.float() / tau
            # The lowest finite float rather than -inf: a row with no candidate of rank >= r would
            # otherwise give logsumexp(-inf, ...) = -inf and a NaN gradient, even though none of its
            # terms is selected below.
            closer = ranks < rank
            log_z = torch.logsumexp(
                logits.masked_fill(closer, torch.finfo(logits.dtype).min), dim=1, keepdim=True
            )
            total = total + (log_z - logits)[positive].sum()
            count = count + positive.sum()
        return total, count
