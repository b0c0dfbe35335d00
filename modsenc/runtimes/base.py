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
from pathlib import Path

import torch

from modsenc.utils.errors import InputError

# torch: the packed, padding-free backbone with each language's modules merged into a copy of its
# encoder layers (the reference, and the only one for GPUs); openvino: each language's merged
# encoder compiled by OpenVINO (CPU inference).
RUNTIMES = ("torch", "openvino")


def language_key(lang: str | None, kinds: frozenset[str]) -> tuple[str | None, frozenset[str]]:
    """What a runtime builds once and keeps, per language and modules. With no modules the encoder
    is the backbone's whatever the language (e5's English, and text the zoo has no bundle for), so
    they share one."""
    return (lang if kinds else None, kinds)


class Runtime(ABC):
    """Runs token ids of one language through its modules; see the module's docstring."""

    name: str  # one of RUNTIMES
    # The reference runtime's vectors are the ones every other runtime is checked against (a
    # non-finite vector from another runtime is its own fault when the reference's are finite).
    is_reference: bool = False
    precision: str  # the matrix products' precision: fp32 or bf16

    def cache_folder(self) -> Path | None:
        """Where this runtime keeps what it builds between runs (None: nothing)."""
        return None

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

    def token_embeddings(
        self, lang: str | None, kinds: frozenset[str], token_ids: Sequence[Sequence[int]], batch_size: int
    ) -> list[torch.Tensor]:
        """Each sequence's last hidden states, one (its tokens, hidden) float32 tensor on the CPU
        per sequence, in order (sentence-transformers' ``token_embeddings``). A runtime whose
        graphs pool inside the forward pass has none to give: ``InputError`` saying so."""
        raise InputError(
            f"the {self.name} runtime gives sentence embeddings only (its graphs pool inside); "
            "load the encoder with runtime='torch' for token embeddings"
        )

    @abstractmethod
    def drop(self, lang: str) -> None:
        """Forget whatever was built for ``lang`` (the encoder unloads its modules)."""
