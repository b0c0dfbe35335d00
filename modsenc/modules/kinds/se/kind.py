"""``se``: the sentence-encoding adapter, a LoRA on all linear layers
(``config.sentence_adapter_config``), added to the LA's delta and trained on paraphrase pairs
(``stage.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from modsenc.modules.kinds.lora import LoraKind

if TYPE_CHECKING:
    from modsenc.modules.kinds.stage import StageRecipe


class SentenceAdapterKind(LoraKind):
    name: ClassVar[str] = "se"
    files: ClassVar[tuple[str, ...]] = ("se",)

    def stage(self) -> StageRecipe:
        from modsenc.modules.kinds.se.stage import STAGE  # noqa: PLC0415 - torch

        return STAGE
