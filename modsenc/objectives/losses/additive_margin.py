"""LaBSE's bidirectional in-batch softmax with additive margin (Yang et al., 2019; Feng et al., 2022).

    L = -1/N Σ_i log e^{s(φ(x_i,y_i) - m)} / (e^{s(φ(x_i,y_i) - m)} + Σ_{j≠i} e^{s φ(x_i,y_j)}),  L̄ = L + L'

φ = cosine, m = margin, s = scale; L' is the same with x and y swapped. This is
sentence-transformers' ``MultipleNegativesRankingLoss`` with both directions
(``query_to_doc``, ``doc_to_query``) normalised per direction, on precomputed vectors through
``compute_loss_from_embeddings``, and a similarity that subtracts the margin from the positive
(diagonal) entries; MNRL itself has no margin parameter.

Hard negatives ``y⁻`` (extra candidates on y's side, MNRL's third column) join the denominator of
L only: x_i is ranked against every y and every y⁻, while L' ranks each y_i against the x's.
"""

from __future__ import annotations

import torch
from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
from sentence_transformers.util import cos_sim
from torch import nn

from modsenc.backbone.precision import full_precision


class AdditiveMarginSoftmaxLoss(nn.Module):
    def __init__(self, margin: float = 0.3, scale: float = 20.0) -> None:
        super().__init__()
        if margin < 0:
            raise ValueError(f"margin must be >= 0, got {margin}")
        self.margin = margin
        self.mnrl = MultipleNegativesRankingLoss(
            model=None,
            scale=scale,
            similarity_fct=self.margin_cosine,
            directions=("query_to_doc", "doc_to_query"),
            partition_mode="per_direction",
        )

    def margin_cosine(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Cosine matrix with the margin taken off the positives. MNRL lays out its candidates as
        the batch's positives first, then any hard negatives, so row i's positive is column i in
        both directions (n x n(1+k) for x against y and y⁻, n x n for y against x)."""
        similarity = cos_sim(a, b)
        rows, columns = similarity.shape
        if rows > columns:
            raise ValueError(
                f"additive margin needs a positive for every anchor, got {tuple(similarity.shape)}"
            )
        return similarity - self.margin * torch.eye(rows, columns, device=similarity.device)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, negatives: torch.Tensor | None = None
    ) -> torch.Tensor:
        """L + L' (LaBSE's bidirectional loss) over the batch, ``negatives`` (any number of rows)
        as extra candidates for the x's; vectors already gathered across processes."""
        if x.shape != y.shape:
            raise ValueError(f"x {tuple(x.shape)} and y {tuple(y.shape)} differ in shape")
        if negatives is not None and negatives.shape[1:] != y.shape[1:]:
            raise ValueError(f"negatives {tuple(negatives.shape)} and y {tuple(y.shape)} differ in width")
        embeddings = [x.float(), y.float()] + ([] if negatives is None else [negatives.float()])
        # MNRL's per_direction mode returns (L + L') / 2; the similarity matrix in fp32 under bf16.
        with full_precision(x):
            return 2 * self.mnrl.compute_loss_from_embeddings(embeddings, labels=None)
