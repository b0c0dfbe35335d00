"""int8 quantisation of a model's linear layers for CPU inference, with torchao.

Why torchao and not ``torch.ao.quantization.quantize_dynamic``: the older API swaps modules whose
type is exactly ``nn.Linear`` for new quantised modules. In a ``ModularBackbone`` the backbone's
linears are wrapped by the ``adapters`` library (``LoRALinearTorch``) and by peft's LoRA layers, so
``quantize_dynamic`` either leaves them in float32 or replaces peft's own LoRA matrices, after which
peft cannot load the next language into them (docs/benchmarks.md, "Serving"). torchao instead
replaces each linear's *weight* by an int8 tensor subclass and keeps the module: the adapters
wrappers call ``F.linear`` on that weight unchanged, and peft wraps such layers with its own
``TorchaoLoraLinear``, so language modules still load lazily after the backbone is quantised.

Quantise the backbone *before* any language module is loaded: the modules' own small matrices
(LoRA, bottleneck adapters) then stay in float32, as they are trained.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI's options read QUANTIZATIONS without importing torch
    from torch import nn

# int8: the torch runtime's torchao linears, or the openvino runtime's NNCF graph; int8-mixed and
# int8-weights are NNCF schemes of the openvino runtime only (modsenc/runtimes/int8.py).
QUANTIZATIONS = ("none", "int8", "int8-mixed", "int8-weights")
TORCH_QUANTIZATIONS = ("int8",)


def check_quantization(name: str | None) -> str | None:
    """``None`` for no quantisation, else the validated scheme name."""
    if name is None or name == "none":
        return None
    if name not in QUANTIZATIONS:
        raise ValueError(f"quantize must be one of {', '.join(QUANTIZATIONS)}; got {name!r}")
    return name


def require_torchao(scheme: str = "int8") -> None:
    """Raise ImportError with the install command when torchao is missing (call before slow work)."""
    try:
        import torchao.quantization  # noqa: F401, PLC0415
    except ImportError as err:
        raise ImportError(
            f"quantize={scheme!r} needs torchao: pip install -e '.[quantize]' (or pip install torchao)"
        ) from err


def quantize_linears(model: nn.Module, scheme: str = "int8") -> nn.Module:
    """Quantise every ``nn.Linear`` of ``model`` in place (dynamic int8 activations per token, int8
    weights per output channel) and return it."""
    if check_quantization(scheme) not in TORCH_QUANTIZATIONS:
        raise ValueError(f"quantize={scheme!r} is the openvino runtime's; the torch runtime has int8 only")
    require_torchao(scheme)
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_  # noqa: PLC0415

    quantize_(model, Int8DynamicActivationInt8WeightConfig())
    return model


def is_quantized(module: nn.Module) -> bool:
    """True if some linear weight of ``module`` is a torchao quantised tensor."""
    try:
        from torchao.utils import TorchAOBaseTensor  # noqa: PLC0415
    except ImportError:
        return False
    return any(isinstance(p, TorchAOBaseTensor) for p in module.parameters())


@contextlib.contextmanager
def no_merge_warning() -> Iterator[None]:
    """peft warns, for every LoRA layer it puts on a quantised linear, that the layer cannot be merged
    into the int8 weight. modsenc never merges a served model, so the warning says nothing there."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*was instantiated without `get_apply_tensor_subclass`")
        yield
