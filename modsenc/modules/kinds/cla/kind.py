"""``cla``: cross-lingual alignment, an adapters-library parallel bottleneck adapter
(``ParBnConfig``, ``config.alignment_adapter_config``) named ``LANG_cla`` beside
each feed-forward block, trained to map the language onto the frozen pivot's vectors.

``adapters.init`` runs on the raw Hugging Face model before peft wraps it (``ModuleHost``), so
both libraries' layers sit in the backbone's packed forward. Merged by
``modsenc.modules.kinds.bottleneck``'s arithmetic; trained by ``stage.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from modsenc.modules.kinds.base import ModuleHost, ModuleKind, module_name

if TYPE_CHECKING:
    from adapters import ParBnConfig
    from transformers import PreTrainedModel

    from modsenc.modules.kinds.stage import StageRecipe


class AlignmentKind(ModuleKind):
    """Saved as ``cla/`` in adapters' format (``adapter_config.json`` + ``adapter.safetensors``)."""

    name: ClassVar[str] = "cla"
    files: ClassVar[tuple[str, ...]] = ("cla",)
    library: ClassVar[str] = "adapters"
    crosslingual: ClassVar[bool] = True
    export_note: ClassVar[str] = "the CLA folded into the feed-forward blocks as extra neurons"

    def stage(self) -> StageRecipe:
        from modsenc.modules.kinds.cla.stage import STAGE  # noqa: PLC0415 - torch

        return STAGE

    def create(self, modular: ModuleHost, lang: str, config: ParBnConfig) -> None:
        modular.backbone.model.add_adapter(module_name(lang, self.name), config=config)
        modular.mark_loaded(lang, self.name)

    def load(self, modular: ModuleHost, lang: str, directory: Path) -> None:
        name, source = module_name(lang, self.name), str(directory / self.files[0])
        modular.backbone.model.load_adapter(source, load_as=name, use_safetensors=True)
        modular.mark_loaded(lang, self.name)

    def save(self, modular: ModuleHost, lang: str, directory: Path) -> None:
        target = str(directory / self.files[0])
        modular.backbone.model.save_adapter(target, module_name(lang, self.name), use_safetensors=True)

    def remove(self, modular: ModuleHost, lang: str) -> None:
        name = module_name(lang, self.name)
        if name in modular.backbone.model.adapters_config:
            modular.backbone.model.delete_adapter(name)

    def activate(self, modular: ModuleHost, lang: str | None, active: Sequence[str]) -> None:
        # One bottleneck kind is registered; a list would mean adapters' Stack, not a sum.
        modular.backbone.model.set_active_adapters(module_name(lang, active[0]) if active else None)

    def merge_into(self, plain: PreTrainedModel, modular: ModuleHost, lang: str, widen: bool) -> None:
        """``widen``: the bottleneck becomes extra FFN neurons (exact for the FFN's activation);
        otherwise a copy of it runs beside every FFN, so ``modular`` can drop the language later."""
        from modsenc.modules.kinds.bottleneck import (  # noqa: PLC0415 - torch
            OutputWithParallelBottleneck,
            widen_ffn,
        )

        name, hidden_act = module_name(lang, self.name), plain.config.hidden_act
        for layer, live in zip(plain.encoder.layer, modular.backbone.model.encoder.layer):
            adapter = live.output.adapters[name]
            if widen:
                widen_ffn(layer, adapter, hidden_act)
            else:
                layer.output = OutputWithParallelBottleneck(layer.output, copy.deepcopy(adapter))
        if widen:
            plain.config.intermediate_size = plain.encoder.layer[0].intermediate.dense.out_features
