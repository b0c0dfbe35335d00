"""``la``: the language adapter, a LoRA on the attention query, key and value projections
(``modsenc.modules.configs.language_adapter_config``), trained with the embeddings by masked
language modelling."""

from __future__ import annotations

from typing import ClassVar

from modsenc.modules.kinds.lora import LoraKind


class LanguageAdapterKind(LoraKind):
    name: ClassVar[str] = "la"
    files: ClassVar[tuple[str, ...]] = ("la",)
