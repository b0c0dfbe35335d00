"""Padding-free batches: every sentence's tokens laid end to end in one 1-D tensor.

A packed batch never holds a padding token, so the linear layers (most of an encoder's
FLOPs) run only on real tokens and attention runs per sequence (see ``attention.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class PackedBatch:
    """Sequences of token ids concatenated without padding.

    ``input_ids[cu_seqlens[i]:cu_seqlens[i+1]]`` is sequence ``i``; ``position_ids`` restart at each
    sequence (offset by the model's position offset, 2 for XLM-R, 0 for BERT).
    """

    input_ids: torch.Tensor  # (total_tokens,) long
    position_ids: torch.Tensor  # (total_tokens,) long
    seqlens: list[int]
    cu_seqlens: torch.Tensor  # (batch + 1,) int32, cumulative lengths starting at 0

    @classmethod
    def from_ids(cls, sequences: Sequence[Sequence[int]], position_offset: int = 0) -> PackedBatch:
        if len(sequences) == 0:
            raise ValueError("cannot pack an empty list of sequences")
        seqlens = [len(s) for s in sequences]
        if min(seqlens) == 0:
            raise ValueError("cannot pack an empty sequence (every sentence needs at least one token)")
        input_ids = torch.tensor([t for s in sequences for t in s], dtype=torch.long)
        position_ids = torch.cat([torch.arange(n) for n in seqlens]) + position_offset
        cu = torch.zeros(len(seqlens) + 1, dtype=torch.int32)
        cu[1:] = torch.cumsum(torch.tensor(seqlens), 0)
        return cls(input_ids, position_ids, seqlens, cu)

    @property
    def num_sequences(self) -> int:
        return len(self.seqlens)

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.numel())

    @property
    def first_token_index(self) -> torch.Tensor:
        """Index of each sequence's first token (CLS / <s>) in the packed tensor."""
        return self.cu_seqlens[:-1].long()

    def to(self, device: torch.device | str) -> PackedBatch:
        return PackedBatch(
            self.input_ids.to(device),
            self.position_ids.to(device),
            self.seqlens,
            self.cu_seqlens.to(device),
        )

    def with_input_ids(self, input_ids: torch.Tensor) -> PackedBatch:
        """Same layout, other ids (e.g. the masked copy of a batch)."""
        if input_ids.shape != self.input_ids.shape:
            raise ValueError(f"expected {tuple(self.input_ids.shape)} ids, got {tuple(input_ids.shape)}")
        return PackedBatch(input_ids, self.position_ids, self.seqlens, self.cu_seqlens)

    def split(self, values: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Split a packed (total_tokens, ...) tensor into one tensor per sequence."""
        return torch.split(values, self.seqlens)

    def pad(self, values: torch.Tensor, pad_value: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded (batch, max_len, ...) view plus a bool mask, for code that needs a rectangle."""
        padded = torch.nn.utils.rnn.pad_sequence(
            list(self.split(values)), batch_first=True, padding_value=pad_value
        )
        mask = torch.zeros(padded.shape[:2], dtype=torch.bool, device=values.device)
        for i, n in enumerate(self.seqlens):
            mask[i, :n] = True
        return padded, mask
