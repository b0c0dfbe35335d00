"""Attention backends over packed (padding-free) sequences, behind one interface.

Each backend takes packed ``q, k, v`` of shape (total_tokens, heads, head_dim) and the
sequence lengths, and returns the packed attention output. None of them computes a score
for a padding token, because there is none: sequences never attend across each other.

- ``xformers``: ``memory_efficient_attention`` with a ``BlockDiagonalMask`` (CUDA), as in the
  MEXMA paper (appendix A.1).
- ``sdpa``: PyTorch ``scaled_dot_product_attention`` run once per run of equal-length
  sequences (any device; the CPU path). Sequences are ordered by length first, so with
  length-bucketed batches there are few, large runs.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
import torch.nn.functional as F


class AttentionBackend(Protocol):
    name: str

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seqlens: list[int], dropout_p: float
    ) -> torch.Tensor: ...


class SdpaVarlenAttention:
    """Exact attention per sequence; each run of consecutive equal-length sequences is one call.

    The packed encoder orders sequences by length before its layers (``run_packed_layers``), so a
    run is a contiguous slice that is viewed, not gathered, as a (sequences, length) rectangle:
    no copies, and no scatter in the backward pass.
    """

    name = "sdpa"
    sorts_by_length = True  # ask run_packed_layers to order sequences by length first

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seqlens: list[int], dropout_p: float = 0.0
    ) -> torch.Tensor:
        _, heads, dim = q.shape
        outputs = []
        start = 0
        for length, count in _runs(seqlens):
            stop = start + length * count
            q_r, k_r, v_r = (x[start:stop].view(count, length, heads, dim).transpose(1, 2) for x in (q, k, v))
            o = F.scaled_dot_product_attention(q_r, k_r, v_r, dropout_p=dropout_p)
            outputs.append(o.transpose(1, 2).reshape(length * count, heads, dim))
            start = stop
        return outputs[0] if len(outputs) == 1 else torch.cat(outputs)


def _runs(seqlens: list[int]) -> list[tuple[int, int]]:
    """(length, count) for each run of consecutive equal lengths."""
    runs: list[tuple[int, int]] = []
    for n in seqlens:
        if runs and runs[-1][0] == n:
            runs[-1] = (n, runs[-1][1] + 1)
        else:
            runs.append((n, 1))
    return runs


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


# What a recipe's `attention` key and `--attention` take ("auto": xformers on CUDA when installed).
ATTENTION_CHOICES = ("auto", "sdpa", "xformers")


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
                "(pip install -e '.[gpu]'); use attention: sdpa on CPU"
            )
        return XFormersAttention()
    raise ValueError(f"unknown attention backend {name!r}; choose one of: auto, sdpa, xformers")
