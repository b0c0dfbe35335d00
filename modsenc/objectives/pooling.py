"""Sentence vectors from packed hidden states, with the backbone's pooling ("cls" or "mean").

The objectives pool through this function rather than ``Backbone.sentence_embedding`` so that the
vector they train is the one the backbone's ``pooling`` attribute says it serves at inference
(a backbone without that attribute is a CLS backbone, as MEXMA's always were).
"""

from __future__ import annotations

import torch
from torch import nn

from modsenc.backbone.packing import PackedBatch

POOLINGS = ("cls", "mean")


def backbone_pooling(backbone: nn.Module) -> str:
    pooling = getattr(backbone, "pooling", "cls")
    if pooling not in POOLINGS:
        raise ValueError(
            f"backbone pooling {pooling!r} is not supported by the objectives; use one of {POOLINGS}"
        )
    return pooling


def mean_pool(hidden: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
    """Average of every token of each sequence (special tokens included, as sentence-transformers'
    mean pooling over the attention mask does): (num_sequences, hidden)."""
    lengths = torch.tensor(batch.seqlens, device=hidden.device)
    owner = torch.repeat_interleave(torch.arange(len(batch.seqlens), device=hidden.device), lengths)
    sums = hidden.new_zeros(len(batch.seqlens), hidden.shape[-1]).index_add_(0, owner, hidden)
    return sums / lengths.unsqueeze(1).to(hidden.dtype)


def pool(backbone: nn.Module, hidden: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
    """The sentence vectors of a packed forward, pooled as ``backbone.pooling`` says (default CLS)."""
    if backbone_pooling(backbone) == "mean":
        return mean_pool(hidden, batch)
    return hidden.index_select(0, batch.first_token_index)
