"""The runtime seam: what the encoder asks of whatever runs the forward passes.

A runtime is handed a language (None: the bare backbone) and the modules a mode runs
(``kinds``), and token ids already through that language's orthography, prompt and tokenizer
(``ModularBackbone.tokenized``); it gives back one float32 vector per sequence, in their order.
The encoder holds its lock around every call, and loads and unloads the languages' modules
itself; a runtime only keeps what it derives from them (the torch runtime nothing, the OpenVINO
runtime one compiled graph per language and modules), which ``drop`` forgets.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from modsenc.modules.bundle import Zoo
    from modsenc.modules.modular import ModularBackbone

# torch: the packed, padding-free backbone with the modules live (the default, and the only one for
# training and GPUs); openvino: each language's merged encoder compiled by OpenVINO (CPU inference).
RUNTIMES = ("torch", "openvino")


class Runtime(ABC):
    """Runs token ids of one language through its modules; see the module's docstring."""

    name: str  # one of RUNTIMES
    precision: str  # the matrix products' precision: fp32 or bf16

    @abstractmethod
    def prepare(self, lang: str | None, kinds: frozenset[str]) -> None:
        """Make ``lang`` with ``kinds`` ready to encode (its modules are loaded): e.g. compile it."""

    @abstractmethod
    def encode_tokens(
        self,
        lang: str | None,
        kinds: frozenset[str],
        token_ids: Sequence[Sequence[int]],
        batch_size: int,
        show_progress_bar: bool = False,
    ) -> torch.Tensor:
        """(len(token_ids), hidden) float32 sentence vectors on the CPU, in ``token_ids``' order:
        ``batch_size`` sequences of similar length per forward pass (``length_sorted``)."""

    @abstractmethod
    def drop(self, lang: str) -> None:
        """Forget whatever was built for ``lang`` (the encoder unloads its modules)."""


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
