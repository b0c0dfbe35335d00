"""The ``se`` recipe section and the peft config it builds (the paper's values, Huang et al., 2025,
appendix B)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from modsenc.modules.kinds.stage import LoRASettings, Schedule

if TYPE_CHECKING:
    from peft import LoraConfig

# Linear layers of a BERT / XLM-R layer, by the attribute names peft matches on: "dense" matches
# attention.output.dense, intermediate.dense and output.dense, every other linear.
ALL_LINEAR = ["query", "key", "value", "dense"]


@dataclass
class SEConfig(Schedule, LoRASettings):
    """``se``: the sentence-encoding adapter, LoRA on every linear layer, MNRL on paraphrases."""

    scale: float = 20.0  # the similarity scale of the MNRL loss
    epochs: float | None = 5.0
    batch_size: int = 16
    # Paraphrase pairs of these other languages (from the same data.paraphrase files) are added to
    # the language's own: the adapter learns sentence similarity from related languages and the
    # pivot too, and is still applied to this language's text only. "*": every language there.
    transfer_languages: list[str] = field(default_factory=list)


def sentence_adapter_config(r: int = 8, alpha: int = 16, dropout: float = 0.1, **extra: Any) -> LoraConfig:
    """SE: LoRA on all linear layers of the encoder."""
    from peft import LoraConfig  # noqa: PLC0415 - recipes are read without peft

    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=ALL_LINEAR, **extra)
