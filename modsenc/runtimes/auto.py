"""What ``runtime="auto"`` runs: the fastest measured runtime and precision that keeps quality.

The quality bound: a mean cosine of at least 0.99 to fp32 on held-out text (int8) or 0.9999 (bf16),
as docs/benchmarks.md measures them. Within it, each CPU kind gets the arm that was fastest when
measured on that kind ("Which runtime on my CPU?" in docs/benchmarks.md); the rules, first match:

| where                                  | runtime  | precision | int8 | measured on                    |
|----------------------------------------|----------|-----------|------|--------------------------------|
| a GPU                                  | torch    | auto      | no   | H200 (docs/results/gpu.md)     |
| a CPU without openvino (or nncf)       | torch    | auto      | no   | any: the only runtime there    |
| a CPU with AMX                         | openvino | bf16      | no   | Intel Sapphire Rapids          |
| a CPU with AVX512_VNNI, no AMX         | openvino | auto      | yes  | AMD EPYC Zen 4 (see below)     |
| any other CPU (AVX2)                   | openvino | auto      | no   | AMD EPYC Zen 3 (avx2 only)     |

On Zen 4 the measurement is OpenVINO's own static int8 through sentence-transformers (1.45x
OpenVINO bf16 at a cosine of 0.987); modsenc's int8 graph is the same NNCF quantisation and was not
measured there. ``auto`` precision stays ``backbone/precision.py``'s: bf16 where native.
An explicit ``runtime=`` (anything but auto) is always taken as given.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import torch

from modsenc.backbone.precision import cpu_flags

AUTO = "auto"


@dataclass(frozen=True)
class RuntimeChoice:
    """What ``auto`` resolved to, and the rule that chose it (logged, shown by ``modsenc serve``)."""

    runtime: str
    dtype: str  # auto, fp32 or bf16 (auto: resolve_precision decides)
    quantize: str | None
    rule: str


# AMD EPYC Zen 3 (avx2, fma; no AVX512, VNNI, AVX512_BF16 or AMX), bench/encode.py --sections side,
# 512 NTREX uz sentences routed, 2 threads: OpenVINO fp32 58.4 sentences/s, its NNCF int8 42.7
# (int8 without VNNI pays for its conversions), the torch runtime 44.1 (docs/benchmarks.md).
AVX2_CHOICE = RuntimeChoice(
    "openvino", "auto", None, "no VNNI: OpenVINO in fp32 measured fastest (its int8 slower there)"
)


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def choose_runtime(
    device: torch.device, flags: frozenset[str] | None = None, installed: frozenset[str] | None = None
) -> RuntimeChoice:
    """The rules above for ``device``; ``flags`` are the CPU's (/proc/cpuinfo; given in tests),
    ``installed`` the optional packages present (``openvino``, ``nncf``; found when None)."""
    if device.type != "cpu":
        return RuntimeChoice("torch", "auto", None, f"{device.type}: the torch runtime")
    flags = cpu_flags() if flags is None else flags
    if installed is None:
        installed = frozenset(name for name in ("openvino", "nncf") if _installed(name))
    if "openvino" not in installed:
        return RuntimeChoice("torch", "auto", None, "openvino not installed: the torch runtime")
    if "amx_bf16" in flags:
        return RuntimeChoice("openvino", "bf16", None, "AMX: OpenVINO bf16 measured fastest")
    if "nncf" not in installed:
        return RuntimeChoice("openvino", "auto", None, "nncf not installed: OpenVINO without int8")
    if "avx512_vnni" in flags:
        return RuntimeChoice("openvino", "auto", "int8", "AVX512_VNNI without AMX: OpenVINO int8")
    return AVX2_CHOICE
