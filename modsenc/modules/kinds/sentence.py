"""``se``: the sentence-encoding adapter, a LoRA on all linear layers
(``modsenc.modules.configs.sentence_adapter_config``), added to the LA's delta and trained on
paraphrase pairs."""

from __future__ import annotations

from typing import ClassVar

from modsenc.modules.kinds.lora import LoraKind


class SentenceAdapterKind(LoraKind):
    name: ClassVar[str] = "se"
    files: ClassVar[tuple[str, ...]] = ("se",)
