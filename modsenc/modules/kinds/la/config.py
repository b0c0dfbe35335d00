"""The ``la`` recipe section and the peft config it builds (the paper's values, Huang et al., 2025,
appendix B)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modsenc.modules.kinds.stage import LoRASettings, Schedule

if TYPE_CHECKING:
    from peft import LoraConfig

# The attention projections of a BERT / XLM-R layer, by the attribute names peft matches on.
ATTENTION_QKV = ["query", "key", "value"]


@dataclass
class LAConfig(Schedule, LoRASettings):
    """``la``: the language adapter, LoRA on query/key/value (+ the new embeddings), masked LM."""

    mask_ratio: float = 0.15
    max_steps: int | None = 300


def language_adapter_config(r: int = 8, alpha: int = 16, dropout: float = 0.1, **extra: Any) -> LoraConfig:
    """LA: LoRA on the attention query, key and value projections."""
    from peft import LoraConfig  # noqa: PLC0415 - recipes are read without peft

    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=ATTENTION_QKV, **extra)
