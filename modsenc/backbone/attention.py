"""Attention backends over packed (padding-free) sequences, behind one interface.

Each backend takes packed ``q, k, v`` of shape (total_tokens, heads, head_dim) and the
sequence lengths, and returns the packed attention output. None of them computes a score
for a padding token, because there is none: sequences never attend across each other.

- ``xformers``: ``memory_efficient_attention`` with a ``BlockDiagonalMask`` (CUDA), as in the
  MEXMA paper (appendix A.1).
- ``sdpa``: PyTorch ``scaled_dot_product_attention`` run once per group of equal-length
  sequences (any device; the CPU path). With length-bucketed batches most groups are large.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Protocol

import torch
import torch.nn.functional as F


class AttentionBackend(Protocol):
    name: str

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seqlens: list[int], dropout_p: float
    ) -> torch.Tensor: ...


class SdpaVarlenAttention:
    """Exact attention per sequence, batching sequences that share a length."""

    name = "sdpa"

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seqlens: list[int], dropout_p: float = 0.0
    ) -> torch.Tensor:
        total, heads, dim = q.shape
        starts = [0]
        for n in seqlens[:-1]:
            starts.append(starts[-1] + n)
        by_length: dict[int, list[int]] = defaultdict(list)
        for start, n in zip(starts, seqlens):
            by_length[n].append(start)

        out = torch.empty_like(q)
        for n, group_starts in by_length.items():
            # Token indices of the group's sequences, (group * n,): gathered into one rectangle.
            offsets = torch.tensor(group_starts, device=q.device)[:, None]
            index = (offsets + torch.arange(n, device=q.device)).reshape(-1)
            rect = (len(group_starts), n, heads, dim)
            q_g, k_g, v_g = (x.index_select(0, index).view(rect).transpose(1, 2) for x in (q, k, v))
            o = F.scaled_dot_product_attention(q_g, k_g, v_g, dropout_p=dropout_p)
            out = out.index_copy(0, index, o.transpose(1, 2).reshape(-1, heads, dim))
        return out


class XFormersAttention:
    """xFormers memory-efficient attention over a block-diagonal mask (CUDA only)."""

    name = "xformers"

    def __init__(self) -> None:
        from xformers.ops import fmha  # noqa: PLC0415 - optional GPU dependency

        self._fmha = fmha

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seqlens: list[int], dropout_p: float = 0.0
    ) -> torch.Tensor:
        bias = self._fmha.attn_bias.BlockDiagonalMask.from_seqlens(seqlens)
        out = self._fmha.memory_efficient_attention(
            q[None], k[None], v[None], attn_bias=bias, p=dropout_p, scale=1.0 / math.sqrt(q.shape[-1])
        )
        return out[0]


def xformers_available() -> bool:
    if not torch.cuda.is_available():
        return False
    try:
        import xformers.ops  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def available_backends() -> list[str]:
    return ["sdpa"] + (["xformers"] if xformers_available() else [])


def get_attention_backend(name: str = "auto", device: torch.device | str | None = None) -> AttentionBackend:
    """``auto`` picks xformers on CUDA when installed, else the SDPA varlen path."""
    if name == "auto":
        on_cuda = device is not None and torch.device(device).type == "cuda"
        name = "xformers" if on_cuda and xformers_available() else "sdpa"
    if name == "sdpa":
        return SdpaVarlenAttention()
    if name == "xformers":
        if not xformers_available():
            raise RuntimeError(
                "attention backend 'xformers' needs CUDA and the xformers package "
                "(pip install 'modsenc[gpu]'); use attention: sdpa on CPU"
            )
        return XFormersAttention()
    raise ValueError(f"unknown attention backend {name!r}; choose one of: auto, sdpa, xformers")
