"""What the trainer needs from a backbone objective (MEXMA, EMS, EMMA-X, contrastive, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from modsenc.backbone.encoder import Backbone
from modsenc.data.readers import TranslationPair
from modsenc.utils.distributed import DistContext


@dataclass
class TokenizedPair:
    ids_a: list[int]
    ids_b: list[int]

    @property
    def length(self) -> int:
        """Bucketing key: both sides of a pair share a batch, so the longer side counts."""
        return max(len(self.ids_a), len(self.ids_b))


@dataclass
class ObjectiveData:
    """What an objective may need from the recipe's data besides the translation pairs."""

    languages: list[str] = field(default_factory=list)  # every language of the pairs, sorted
    # (query, key) texts without a translation: monolingual sentences (key = the sentence itself)
    # and paraphrase pairs (key = the paraphrase), for objectives that use non-parallel text.
    non_parallel: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class ObjectiveOutput:
    loss: torch.Tensor  # what to back-propagate (scaled so DDP averaging gives global-batch gradients)
    metrics: dict[str, float]  # global-batch values, for logging
    num_tokens: int  # real (non-padding) input tokens of this process's pairs
    extras: dict[str, torch.Tensor] = field(default_factory=dict)


class Objective(nn.Module):
    """A training objective over translation pairs; owns its extra parameters (e.g. heads)."""

    name: str = "objective"

    def prepare(
        self, pairs: Sequence[TranslationPair], backbone: Backbone, max_length: int
    ) -> list[TokenizedPair]:
        """Tokenise once, before training (lengths drive the bucketing)."""
        ids_a = backbone.tokenize([p.text_a for p in pairs], max_length)
        ids_b = backbone.tokenize([p.text_b for p in pairs], max_length)
        return [TokenizedPair(a, b) for a, b in zip(ids_a, ids_b)]

    def collate(
        self,
        examples: Sequence[TokenizedPair],
        rng: np.random.Generator,
        backbone: Backbone,
        rank: int = 0,
        world_size: int = 1,
    ) -> Any:
        """Build this process's share of one global batch. Randomness (masking) is drawn for the
        whole global batch first, so the result does not depend on the number of processes."""
        raise NotImplementedError

    def forward(self, backbone: Backbone, batch: Any, dist: DistContext) -> ObjectiveOutput:
        raise NotImplementedError
