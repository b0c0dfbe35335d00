"""Which precision the matrix multiplications run in: bf16 autocast where the hardware has it.

bf16 is fast only where the hardware computes it natively: CUDA GPUs, and CPUs with AMX (Intel
Sapphire Rapids and later) or AVX512_BF16 (recent Xeons, AMD Zen 4), where oneDNN runs bf16
GEMMs at several times the fp32 rate (docs/benchmarks.md). Elsewhere a CPU emulates bf16 and is
slower than fp32. ``auto`` therefore chooses by detection, never by assumption.

Only the GEMMs go to bf16 (``torch.autocast``): weights, optimiser state and master copies stay
fp32, and the code that needs precision (pooling, similarity matrices, losses, KoLeo, softmax over
the vocabulary) runs in fp32 under ``full_precision()``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from pathlib import Path

import torch

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "fp32", "bf16")
# CPU flags (/proc/cpuinfo) that mean native bf16 matrix arithmetic.
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as the kernel reports them (/proc/cpuinfo; empty where unreadable)."""
    return frozenset(_cpuinfo_flags())


def _cpuinfo_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """True where the CPU computes bf16 GEMMs natively (AMX or AVX512_BF16).

    Asks torch first (``torch.cpu._is_amx_tile_supported`` / ``_is_avx512_bf16_supported``, what
    oneDNN itself dispatches on), then the kernel's CPU flags where torch cannot say.
    """
    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    answers = [getattr(torch.cpu, name)() for name in probes if hasattr(torch.cpu, name)]
    if answers:
        return any(answers)
    return bool(set(NATIVE_BF16_FLAGS) & _cpuinfo_flags())


def check_precision(precision: str | None) -> str:
    """``precision`` as given (None -> auto), or a ValueError naming the choices."""
    precision = "auto" if precision is None else str(precision).lower()
    if precision not in PRECISIONS:
        raise ValueError(f"precision (--dtype) must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def resolve_precision(precision: str | None, device: torch.device | str) -> str:
    """``fp32`` or ``bf16``: what ``auto`` means on this device, or the explicit choice.

    An explicit ``bf16`` on a CPU without native support is honoured (it is slow, not wrong), with
    a warning.
    """
    precision = check_precision(precision)
    device_type = torch.device(device).type
    if device_type == "cuda":
        native = torch.cuda.is_bf16_supported()
    elif device_type == "cpu":
        native = cpu_has_native_bf16()
    else:
        native = False
    if precision == "auto":
        chosen = "bf16" if native else "fp32"
        log.debug(
            "precision auto -> %s (%s %s native bf16)",
            chosen,
            device_type,
            "has" if native else "has no",
        )
        return chosen
    if precision == "bf16" and not native:
        log.warning("bf16 on a %s without native bf16: emulated, slower than fp32", device_type)
    return precision


def autocast(device: torch.device | str, precision: str) -> contextlib.AbstractContextManager:
    """bf16 autocast for ``precision == "bf16"`` (a resolved precision), else nothing."""
    if precision == "bf16":
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    if precision != "fp32":
        raise ValueError(f"resolve the precision first (fp32 or bf16), got {precision!r}")
    return contextlib.nullcontext()


def full_precision(tensor: torch.Tensor) -> contextlib.AbstractContextManager:
    """Autocast switched off on ``tensor``'s device: the enclosed code computes in fp32."""
    return torch.autocast(tensor.device.type, enabled=False)
