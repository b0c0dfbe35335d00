"""The torch runtime: the packed, padding-free backbone with a language's modules live.

It alone switches the live modules (``ModularBackbone.active``, under the backbone's lock): a
forward pass for one language never sees another's embeddings or adapters, whichever thread asks.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from modsenc.backbone.precision import autocast
from modsenc.modules.modular import ModularBackbone
from modsenc.runtimes.base import Runtime
from modsenc.runtimes.batching import encode_length_sorted


class TorchRuntime(Runtime):
    name = "torch"
    is_reference = True

    def __init__(self, modular: ModularBackbone, precision: str) -> None:
        self.modular = modular
        self.precision = precision

    def prepare(self, lang: str | None, kinds: frozenset[str]) -> None:
        """Nothing to build: the modules run live, switched in by each ``encode_tokens``."""

    @torch.inference_mode()
    def encode_tokens(
        self,
        lang: str | None,
        kinds: frozenset[str],
        token_ids: Sequence[Sequence[int]],
        batch_size: int,
        show_progress_bar: bool = False,
    ) -> torch.Tensor:
        backbone = self.modular.backbone

        def encode_batch(ids: list[Sequence[int]]) -> torch.Tensor:
            batch = backbone.pack(ids)
            with autocast(backbone.device, self.precision):
                return backbone.sentence_embedding(backbone(batch), batch)  # pooled in fp32

        was_training = backbone.training
        backbone.eval()
        try:
            with self.modular.active(lang, kinds):
                return encode_length_sorted(
                    token_ids, batch_size, backbone.hidden_size, encode_batch, show_progress_bar
                )
        finally:
            backbone.train(was_training)

    @torch.inference_mode()
    def token_embeddings(
        self, lang: str | None, kinds: frozenset[str], token_ids: Sequence[Sequence[int]], batch_size: int
    ) -> list[torch.Tensor]:
        """Each sequence's last hidden states (every token, special ones included), unpooled."""
        backbone = self.modular.backbone
        was_training = backbone.training
        backbone.eval()
        vectors: list[torch.Tensor] = []
        try:
            with self.modular.active(lang, kinds):
                for start in range(0, len(token_ids), batch_size):
                    batch = backbone.pack(list(token_ids[start : start + batch_size]))
                    with autocast(backbone.device, self.precision):
                        hidden = backbone(batch)
                    vectors.extend(h.float().cpu() for h in hidden.split(batch.seqlens))
        finally:
            backbone.train(was_training)
        return vectors

    def drop(self, lang: str) -> None:
        """Nothing kept: the encoder removes the language's modules from the backbone itself."""
