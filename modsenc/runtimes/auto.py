"""What ``runtime="auto"`` runs: the fastest measured runtime and precision that keeps quality.

The quality bound: a mean cosine of at least 0.9999 to fp32 on held-out text and dev STS within
0.3 points, as docs/benchmarks.md and docs/results/int8.md measure them. bf16 keeps it (cosine
0.99997, STS unchanged); int8 does not (the openvino runtime's NNCF int8 graphs of the shipped zoo:
cosine 0.991, dev STS 0.67 points lower on average over 15 columns and up to 1.4). Of the two
gentler schemes, int8-mixed (FFN outputs float) stays below 0.999 on routed text and weight-only
int8-weights keeps 0.9996 but ran at 0.85x bf16 on Sapphire Rapids (docs/benchmarks.md, "Fast
by default"), and neither was measured on a CPU where int8 could beat bf16 (Zen 4's VNNI without
AMX): so ``auto`` never quantises, and ``--quantize`` is the user's call. Within the bound,
each CPU kind gets the arm that was fastest when measured on that kind ("Which runtime on my CPU?" in
docs/benchmarks.md); the rules, first match:

| where                                  | runtime  | precision | measured on                           |
|----------------------------------------|----------|-----------|---------------------------------------|
| a GPU                                  | torch    | auto      | H200 (docs/results/gpu.md)            |
| a CPU without openvino                 | torch    | auto      | any: the only runtime there           |
| a CPU with AMX                         | openvino | bf16      | Intel Sapphire Rapids                 |
| a CPU with AVX512_BF16, no AMX         | openvino | bf16      | AMD EPYC Zen 4 (issue 40's table)     |
| any other CPU (AVX2, AVX512 without bf16) | openvino | auto (fp32) | AMD EPYC Zen 3 (avx2 only)       |

On Zen 4 modsenc's openvino runtime in bf16 ran 136.7 sentences/s routed, 2.3x its torch fp32 and
1.5x its torch bf16, at cosine 0.99997; OpenVINO's static int8 was 1.45x faster still but at cosine
0.987. ``auto`` precision is ``backbone/precision.py``'s: bf16 where native.
An explicit ``runtime=`` (anything but auto) is always taken as given, and so are an explicit
``dtype`` and ``quantize`` under auto. ``auto`` is the default everywhere (``from_pretrained``,
``encode``, ``serve``, ``scale encode``, ``eval``); ``runtime="torch"`` is the reference.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from functools import cache

import torch

from modsenc.backbone.precision import cpu_flags

AUTO = "auto"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RuntimeChoice:
    """What ``auto`` resolved to, and the rule that chose it (logged, shown by ``modsenc serve``)."""

    runtime: str
    dtype: str  # auto, fp32 or bf16 (auto: resolve_precision decides)
    quantize: str | None
    rule: str


# AMD EPYC Zen 3 (avx2, fma; no AVX512, VNNI, AVX512_BF16 or AMX), bench/encode.py --sections side,
# 512 NTREX uz sentences routed, 2 threads, 2026-12-01: OpenVINO fp32 55.1 sentences/s, its NNCF
# int8 37.3 (int8 without VNNI pays for its conversions), the merged torch runtime 48.1,
# sentence-transformers' fastest arm at cosine >= 0.999 (ONNX fp32) 51.6 (docs/benchmarks.md).
AVX2_CHOICE = RuntimeChoice(
    "openvino", "auto", None, "no native bf16: OpenVINO in fp32 (measured fastest on AVX2; int8 slower there)"
)


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


@cache  # once a process: every encoder a server or a script builds would repeat it
def _warn_without_openvino() -> None:
    log.warning(
        "runtime auto: openvino is not installed, so the slower torch runtime runs on this CPU "
        "(OpenVINO ran 1.3-2x faster at the same vectors: docs/benchmarks.md); "
        "pip install 'modsenc[openvino]', or pass runtime='torch' to choose it and silence this"
    )


def choose_runtime(
    device: torch.device, flags: frozenset[str] | None = None, installed: frozenset[str] | None = None
) -> RuntimeChoice:
    """The rules above for ``device``; ``flags`` are the CPU's (/proc/cpuinfo; given in tests),
    ``installed`` the optional packages present (``openvino``; found when None)."""
    if device.type != "cpu":
        return RuntimeChoice("torch", "auto", None, f"{device.type}: the torch runtime")
    flags = cpu_flags() if flags is None else flags
    if installed is None:
        installed = frozenset({"openvino"} if _installed("openvino") else ())
    if "openvino" not in installed:
        _warn_without_openvino()
        return RuntimeChoice("torch", "auto", None, "openvino not installed: the torch runtime")
    if "amx_bf16" in flags:
        return RuntimeChoice("openvino", "bf16", None, "AMX: OpenVINO bf16 measured fastest")
    if "avx512_bf16" in flags:
        return RuntimeChoice(
            "openvino",
            "bf16",
            None,
            "AVX512_BF16 without AMX: OpenVINO bf16 (int8 is outside the quality bound)",
        )
    return AVX2_CHOICE
