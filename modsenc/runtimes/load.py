"""Choosing the runtime, once, when the encoder is built (as sentence-transformers' backend/load.py
chooses its backend when a model loads): nothing downstream asks which one it got."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from modsenc.backbone.quantization import TORCH_QUANTIZATIONS
from modsenc.runtimes.auto import AUTO
from modsenc.runtimes.base import RUNTIMES, Runtime

# What a user may name: a runtime, or auto (runtimes/auto.py picks one when the encoder loads).
RUNTIME_CHOICES = (*RUNTIMES, AUTO)

if TYPE_CHECKING:
    from modsenc.modules.bundle import Zoo
    from modsenc.modules.modular import ModularBackbone


def check_runtime(runtime: str, quantize: str | None, device: torch.device) -> None:
    """``runtime`` is one of ``RUNTIMES`` (or ``auto``, resolved when the encoder loads) and can
    run here with ``quantize``, before any loading: on the openvino runtime ``quantize="int8"`` is
    NNCF's static int8, which needs nncf."""
    if runtime not in RUNTIME_CHOICES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIME_CHOICES)}, got {runtime!r}")
    if runtime == "torch" and quantize not in (None, *TORCH_QUANTIZATIONS):
        raise ValueError(
            f"quantize={quantize!r} is an NNCF scheme of runtime='openvino'; the torch runtime "
            "quantises with int8 only (torchao)"
        )
    if runtime == "openvino":
        if device.type != "cpu":
            raise ValueError(
                f"runtime='openvino' runs on the CPU; got device {device}: use runtime='torch' there"
            )
        from modsenc.runtimes.openvino import require_openvino  # noqa: PLC0415 - openvino is optional

        require_openvino()
        if quantize is not None:
            from modsenc.runtimes.int8 import require_nncf  # noqa: PLC0415 - nncf is optional

            require_nncf()


def load_runtime(
    name: str,
    modular: ModularBackbone,
    zoo: Zoo,
    precision: str,
    quantize: str | None = None,
    calibration: Sequence[str] | None = None,
    verify: bool = True,
) -> Runtime:
    """The runtime ``name`` over ``modular``'s modules, computing in ``precision`` (fp32 or bf16);
    ``zoo`` names the bundles' files, which key the OpenVINO runtime's graph cache. ``quantize``
    and ``calibration`` are the OpenVINO runtime's int8 (the torch runtime's int8 is applied to the
    backbone's linear layers when it loads: ``backbone/quantization.py``)."""
    if name == "openvino":
        from modsenc.runtimes.openvino import OpenVINORuntime  # noqa: PLC0415 - openvino is optional

        return OpenVINORuntime(modular, zoo, precision, quantize, calibration, verify)
    if name == "torch":
        from modsenc.runtimes.torch import TorchRuntime  # noqa: PLC0415

        return TorchRuntime(modular, precision)
    raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {name!r}")
