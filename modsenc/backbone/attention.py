"""Attention backends over packed (padding-free) sequences, behind one interface.

Each backend takes packed ``q, k, v`` of shape (total_tokens, heads, head_dim) and the
sequence lengths, and returns the packed attention output. None of them computes a score
for a padding token, because there is none: sequences never attend across each other.

- ``varlen``: PyTorch's own FlashAttention over cumulative sequence offsets
  (``torch.nn.attention.varlen.varlen_attn``; CUDA, fp16/bf16): one kernel call per layer, no
  extra package.
- ``xformers``: ``memory_efficient_attention`` with a ``BlockDiagonalMask`` (CUDA), as in the
  MEXMA paper (appendix A.1).
- ``sdpa``: PyTorch ``scaled_dot_product_attention`` run once per run of equal-length
  sequences (any device; the CPU path). Sequences are ordered by length first, so with
  length-bucketed batches there are few, large runs.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Sequence
from typing import Protocol

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# SDPA's kernels for the per-length path on CUDA: all but cuDNN's, which builds an execution plan for
# every new input shape, and every batch brings new (sequences, length) runs. On an H200 with a
# MEXMA-base shape the cuDNN kernel made a forward + backward 12x slower (4.2 s against 0.34 s a
# step, bench/attention_cuda.py, docs/results/gpu.md).
CUDA_SDPA_KERNELS = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)


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

    def __init__(self, cuda_kernels: Sequence[SDPBackend] | None = CUDA_SDPA_KERNELS) -> None:
        # None: SDPA's own choice on CUDA (bench/attention_cuda.py's arm with cuDNN).
        self.cuda_kernels = cuda_kernels

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seqlens: list[int], dropout_p: float = 0.0
    ) -> torch.Tensor:
        _, heads, dim = q.shape
        outputs = []
        start = 0
        restricted = q.is_cuda and self.cuda_kernels is not None
        with sdpa_kernel(list(self.cuda_kernels)) if restricted else contextlib.nullcontext():
            for length, count in _runs(seqlens):
                stop = start + length * count
                q_r, k_r, v_r = (
                    x[start:stop].view(count, length, heads, dim).transpose(1, 2) for x in (q, k, v)
                )
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


class TorchVarlenAttention:
    """PyTorch's FlashAttention over packed sequences, one call per layer (CUDA, fp16/bf16 inputs).

    The flash kernel has no attention dropout and no fp32 path; for a call it cannot serve (fp32
    inputs, or attention dropout while training) it runs the per-length SDPA path instead, as
    ``scaled_dot_product_attention`` itself picks among its kernels. Training recipes set attention
    dropout to 0 and train in bf16 on CUDA, so training steps take the flash kernel.
    """

    name = "varlen"

    def __init__(self) -> None:
        from torch.nn.attention.varlen import varlen_attn  # noqa: PLC0415 - torch >= 2.10, CUDA

        self._varlen_attn = varlen_attn
        self._fallback = SdpaVarlenAttention()
        # Every layer of a forward pass sees the same lengths: their offsets are copied to the GPU once.
        self._offsets: tuple[tuple[int, ...], torch.device, torch.Tensor] | None = None

    def _cumulative_offsets(self, seqlens: list[int], device: torch.device) -> torch.Tensor:
        key = tuple(seqlens)
        if self._offsets is None or self._offsets[0] != key or self._offsets[1] != device:
            offsets = torch.tensor([0, *seqlens], dtype=torch.int32).cumsum(0, dtype=torch.int32)
            self._offsets = (key, device, offsets.to(device))
        return self._offsets[2]

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seqlens: list[int], dropout_p: float = 0.0
    ) -> torch.Tensor:
        if dropout_p > 0 or q.dtype not in (torch.float16, torch.bfloat16) or q.device.type != "cuda":
            return self._fallback(q, k, v, seqlens, dropout_p)
        offsets = self._cumulative_offsets(seqlens, q.device)
        longest = max(seqlens)
        # Seven positional arguments: the signature torch 2.10 and later releases share.
        return self._varlen_attn(q, k, v, offsets, offsets, longest, longest)


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


@functools.cache
def _cuda_kernel_runs(name: str) -> bool:
    """Whether backend ``name``'s CUDA kernel runs here: one tiny bf16 call on the current GPU.

    Importing is not enough: an xformers wheel built for another torch or CUDA imports, then fails
    at its first call ("No operator found for memory_efficient_attention_forward"); torch's flash
    kernel needs an Ampere or newer GPU.
    """
    if not torch.cuda.is_available():
        return False
    try:
        backend = TorchVarlenAttention() if name == "varlen" else XFormersAttention()
        q = torch.randn(8, 2, 32, device="cuda", dtype=torch.bfloat16)
        backend(q, q, q, [3, 5], 0.0)
        torch.cuda.synchronize()
    except (ImportError, RuntimeError, NotImplementedError):
        return False
    return True


def varlen_available() -> bool:
    return _cuda_kernel_runs("varlen")


def xformers_available() -> bool:
    return _cuda_kernel_runs("xformers")


# What a recipe's `attention` key and `--attention` take ("auto": the first of varlen, xformers
# whose kernel runs on this CUDA device, else sdpa).
ATTENTION_CHOICES = ("auto", "sdpa", "varlen", "xformers")
_CHECKS = {"varlen": varlen_available, "xformers": xformers_available}


def available_backends() -> list[str]:
    return ["sdpa"] + [name for name, runs in _CHECKS.items() if runs()]


def get_attention_backend(name: str = "auto", device: torch.device | str | None = None) -> AttentionBackend:
    """``auto`` on CUDA: torch's flash varlen kernel, else xformers, whichever runs here; else (and
    on every other device) the SDPA path that attends per run of equal lengths."""
    if name == "auto":
        on_cuda = device is not None and torch.device(device).type == "cuda"
        name = next((n for n, runs in _CHECKS.items() if on_cuda and runs()), "sdpa")
    if name == "sdpa":
        return SdpaVarlenAttention()
    if name in _CHECKS:
        if not _CHECKS[name]():
            needs = {
                "varlen": "torch >= 2.10",
                "xformers": "an xformers build for this torch (pip install -e '.[gpu]')",
            }
            raise RuntimeError(
                f"attention backend {name!r} does not run here: it needs a CUDA GPU (Ampere or newer) "
                f"and {needs[name]}; use attention: sdpa or auto"
            )
        return TorchVarlenAttention() if name == "varlen" else XFormersAttention()
    raise ValueError(f"unknown attention backend {name!r}; choose one of: {', '.join(ATTENTION_CHOICES)}")
