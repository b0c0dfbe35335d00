"""Configurations of the three per-language modules, as the libraries that implement them define them.

peft's ``LoraConfig`` and adapters' ``ParBnConfig`` are the config dataclasses; these functions
only fill in the paper's values (Huang et al., 2025, appendix B) and the module names of
BERT-family encoders.
"""

from __future__ import annotations

from typing import Any

from adapters import ParBnConfig
from peft import LoraConfig

# Linear layers of a BERT / XLM-R layer, by the attribute names peft matches on.
ATTENTION_QKV = ["query", "key", "value"]
# "dense" matches attention.output.dense, intermediate.dense and output.dense: every other linear.
ALL_LINEAR = ["query", "key", "value", "dense"]


def language_adapter_config(r: int = 8, alpha: int = 16, dropout: float = 0.1, **extra: Any) -> LoraConfig:
    """LA: LoRA on the attention query, key and value projections."""
    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=ATTENTION_QKV, **extra)


def sentence_adapter_config(r: int = 8, alpha: int = 16, dropout: float = 0.1, **extra: Any) -> LoraConfig:
    """SE: LoRA on all linear layers of the encoder."""
    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=ALL_LINEAR, **extra)


def alignment_adapter_config(**overrides: Any) -> ParBnConfig:
    """CLA: a parallel bottleneck adapter beside each feed-forward block (adapters' defaults)."""
    return ParBnConfig(**overrides)
