"""Choosing the runtime, once, when the encoder is built (as sentence-transformers' backend/load.py
chooses its backend when a model loads): nothing downstream asks which one it got."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from modsenc.runtimes.base import RUNTIMES, Runtime

if TYPE_CHECKING:
    from modsenc.modules.bundle import Zoo
    from modsenc.modules.modular import ModularBackbone


def check_runtime(runtime: str, quantize: str | None, device: torch.device) -> None:
    """``runtime`` is one of ``RUNTIMES`` and can run here with ``quantize`` (before any loading)."""
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if runtime == "openvino":
        if device.type != "cpu":
            raise ValueError(
                f"runtime='openvino' runs on the CPU; got device {device}: use runtime='torch' there"
            )
        if quantize is not None:
            raise ValueError(
                "quantize is the torch runtime's (torchao); runtime='openvino' computes in bf16 where "
                "the CPU has it (dtype), which docs/benchmarks.md measures faster and closer to fp32"
            )
        from modsenc.runtimes.openvino import require_openvino  # noqa: PLC0415 - openvino is optional

        require_openvino()


def load_runtime(name: str, modular: ModularBackbone, zoo: Zoo, precision: str) -> Runtime:
    """The runtime ``name`` over ``modular``'s modules, computing in ``precision`` (fp32 or bf16);
    ``zoo`` names the bundles' files, which key the OpenVINO runtime's graph cache."""
    if name == "openvino":
        from modsenc.runtimes.openvino import OpenVINORuntime  # noqa: PLC0415 - openvino is optional

        return OpenVINORuntime(modular, zoo, precision)
    if name == "torch":
        from modsenc.runtimes.torch import TorchRuntime  # noqa: PLC0415

        return TorchRuntime(modular, precision)
    raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {name!r}")
