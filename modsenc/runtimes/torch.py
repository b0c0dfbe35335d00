"""The torch runtime: a language's modules merged into a copy of the encoder layers, run packed.

Why merged: with the modules live (peft's LoRA beside each projection, adapters' bottleneck
beside each FFN) every linear layer costs two more matrix products, a scaling and an add, and
under bf16 autocast every weight is cast again on every call: on Sapphire Rapids that path ran
at 0.74x the speed of the same weights merged in bf16, 0.86x in fp32 (docs/benchmarks.md, "Fast
by default"). So
``prepare`` builds, once per (language, modules), what ``export`` writes: ``merged_model``'s
exact merge (the LoRA deltas added into a copy of the weights, the CLA beside each FFN as the
OpenVINO runtime's graph has it), without the word-embedding matrix, which stays the language's
own (``ModularBackbone.embeddings_of``). In bf16 the copy's linear weights are stored in bf16:
autocast would cast them to bf16 on every call anyway, so the vectors are the same and the copy
is half the size (about 42 MB a language for multilingual-e5-small's 21M encoder parameters).

``modules``, chosen when the runtime is built, says how the modules run:

- ``merged``: as above (the default);
- ``live``: switched into the shared backbone for each call (``ModularBackbone.active``) and run
  unmerged. This is what a backbone quantised to int8 by torchao gets (an int8 weight cannot take
  a LoRA delta) and what ``modules="live"`` asks for: the modules exactly as they were trained.

Either way the packed, padding-free forward (``run_packed_layers``) and the pooling are the
backbone's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from modsenc.backbone.attention import AttentionBackend
from modsenc.backbone.encoder import pool, run_packed_layers
from modsenc.backbone.packing import PackedBatch
from modsenc.backbone.precision import autocast
from modsenc.backbone.quantization import is_quantized
from modsenc.modules.export import merged_model
from modsenc.modules.modular import ModularBackbone
from modsenc.runtimes.base import Runtime, language_key
from modsenc.runtimes.batching import encode_length_sorted

MODULE_APPLICATIONS = ("merged", "live")


@dataclass
class MergedLanguage:
    """One (language, modules)'s encoder with the modules merged in: the language's word
    embeddings (shared with the live backbone, not copied), and a merged copy of the rest."""

    words: nn.Embedding
    embeddings: nn.Module  # positions, token types and their LayerNorm
    layers: nn.ModuleList
    attention: AttentionBackend
    precision: str

    def hidden(self, batch: PackedBatch) -> torch.Tensor:
        """Last hidden states of every token of ``batch`` (packed, on the copy's device)."""
        with autocast(batch.input_ids.device, self.precision):
            vectors = self.embeddings(
                inputs_embeds=self.words(batch.input_ids)[None],
                position_ids=batch.position_ids[None],
                token_type_ids=torch.zeros_like(batch.input_ids)[None],
            )[0]
            return run_packed_layers(self.layers, vectors, batch.seqlens, self.attention)


def merge_language(
    modular: ModularBackbone, lang: str | None, kinds: frozenset[str], precision: str
) -> MergedLanguage:
    """``lang``'s ``kinds`` merged into a copy of the backbone's encoder, on the backbone's device,
    its linear weights in bf16 when ``precision`` is bf16 (see the module's docstring)."""
    backbone = modular.backbone
    plain = merged_model(modular, lang, set(kinds), widen_cla=False, word_embeddings=False)
    plain.to(backbone.device)
    if precision == "bf16":
        for module in plain.modules():
            if isinstance(module, nn.Linear):
                module.to(torch.bfloat16)
    plain.requires_grad_(False)
    return MergedLanguage(
        words=modular.embeddings_of(lang, kinds),
        embeddings=plain.embeddings,
        layers=plain.encoder.layer,
        attention=backbone.attention,
        precision=precision,
    )


class TorchRuntime(Runtime):
    name = "torch"
    is_reference = True

    def __init__(self, modular: ModularBackbone, precision: str, modules: str | None = None) -> None:
        """``modules``: ``merged`` or ``live`` (module docstring); None: merged, unless the
        backbone's linear weights are torchao int8, which only run live."""
        if modules is None:
            modules = "live" if is_quantized(modular.backbone) else "merged"
        if modules not in MODULE_APPLICATIONS:
            raise ValueError(f"modules must be one of {', '.join(MODULE_APPLICATIONS)}, got {modules!r}")
        if modules == "merged" and is_quantized(modular.backbone):
            raise ValueError("an int8 (torchao) backbone cannot take merged modules; use modules='live'")
        self.modular = modular
        self.precision = precision
        self.modules = modules
        self._merged: dict[tuple[str | None, frozenset[str]], MergedLanguage] = {}

    def prepare(self, lang: str | None, kinds: frozenset[str]) -> None:
        """``lang``'s ``kinds`` merged, once (the encoder's lock held); nothing to build live."""
        key = language_key(lang, kinds)
        if self.modules == "live" or key in self._merged:
            return
        self._merged[key] = merge_language(self.modular, *key, self.precision)

    def _hidden_states(
        self, lang: str | None, kinds: frozenset[str]
    ) -> Callable[[PackedBatch], torch.Tensor]:
        """A function from a packed batch to its last hidden states, for ``lang`` with ``kinds``."""
        if self.modules == "merged":
            self.prepare(lang, kinds)
            return self._merged[language_key(lang, kinds)].hidden
        backbone = self.modular.backbone

        def live(batch: PackedBatch) -> torch.Tensor:
            with autocast(backbone.device, self.precision):
                return backbone(batch)

        return live

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
        hidden_states = self._hidden_states(lang, kinds)

        def encode_batch(ids: list[Sequence[int]]) -> torch.Tensor:
            batch = backbone.pack(ids)
            return pool(hidden_states(batch), batch, backbone.pooling)  # pooled in fp32

        with self._live(lang, kinds):
            return encode_length_sorted(
                token_ids, batch_size, backbone.hidden_size, encode_batch, show_progress_bar
            )

    @torch.inference_mode()
    def token_embeddings(
        self, lang: str | None, kinds: frozenset[str], token_ids: Sequence[Sequence[int]], batch_size: int
    ) -> list[torch.Tensor]:
        """Each sequence's last hidden states (every token, special ones included), unpooled."""
        backbone = self.modular.backbone
        hidden_states = self._hidden_states(lang, kinds)
        vectors: list[torch.Tensor] = []
        with self._live(lang, kinds):
            for start in range(0, len(token_ids), batch_size):
                batch = backbone.pack(list(token_ids[start : start + batch_size]))
                vectors.extend(h.float().cpu() for h in hidden_states(batch).split(batch.seqlens))
        return vectors

    @contextlib.contextmanager
    def _live(self, lang: str | None, kinds: frozenset[str]) -> Iterator[None]:
        """Live modules: ``lang``'s ``kinds`` switched in, the backbone in eval mode, for the block
        (merged ones need neither: the copy is ``lang``'s and never trains)."""
        if self.modules == "merged":
            yield
            return
        backbone = self.modular.backbone
        was_training = backbone.training
        backbone.eval()
        try:
            with self.modular.active(lang, kinds):
                yield
        finally:
            backbone.train(was_training)

    def drop(self, lang: str) -> None:
        """Forget ``lang``'s merged copies (the encoder removes its modules from the backbone)."""
        for key in [k for k in self._merged if k[0] == lang]:
            del self._merged[key]
