"""KoLeo regulariser (Sablayrolles et al., 2019), as used by DINOv2 and MEXMA."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class KoLeoLoss(nn.Module):
    """``-mean(log(d_i + eps))`` where ``d_i`` is the distance of each L2-normalised vector to its
    nearest other vector in the batch. Spreads sentence vectors over the sphere.

    Computed in fp32 whatever the autocast dtype: the log of small distances is unstable in bf16.
    """

    def __init__(self, eps: float = 1e-8) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        if embeddings.shape[0] < 2:
            raise ValueError("KoLeo needs at least two vectors in the batch")
        with torch.autocast(device_type=embeddings.device.type, enabled=False):
            x = F.normalize(embeddings.float(), p=2, dim=-1, eps=self.eps)
            # The nearest neighbour is chosen without gradient, as in the reference code.
            with torch.no_grad():
                similarity = x @ x.T
                similarity.fill_diagonal_(-2.0)  # below any cosine: never pick oneself
                nearest = similarity.argmax(dim=1)
            distances = F.pairwise_distance(x, x[nearest], p=2, eps=self.eps)
            return -torch.log(distances + self.eps).mean()
