"""``la``: the language adapter, a LoRA on the attention query, key and value projections
(``config.language_adapter_config``), trained with the embeddings by masked language modelling
(``stage.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from modsenc.modules.kinds.lora import LoraKind

if TYPE_CHECKING:
    from modsenc.modules.kinds.stage import StageRecipe


class LanguageAdapterKind(LoraKind):
    name: ClassVar[str] = "la"
    files: ClassVar[tuple[str, ...]] = ("la",)

    def stage(self) -> StageRecipe:
        from modsenc.modules.kinds.la.stage import STAGE  # noqa: PLC0415 - torch

        return STAGE
