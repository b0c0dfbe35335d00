"""Translation pairs with their languages, packed for the pair objectives (EMS, EMMA-X phase 1,
the contrastive baseline): one packed forward over all A sentences then all B sentences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from modsenc.backbone.encoder import Backbone
from modsenc.backbone.packing import PackedBatch
from modsenc.data.batching import shard
from modsenc.data.readers import TranslationPair, is_language_code
from modsenc.objectives.base import Objective, TokenizedPair


@dataclass
class LanguagePair(TokenizedPair):
    """A tokenised pair plus the indices of its two languages in the objective's language table."""

    lang_a: int = -1
    lang_b: int = -1


@dataclass
class PairBatch:
    clean: PackedBatch  # this process's A sentences, then its B sentences
    lang_a: torch.Tensor  # (num_pairs,) language indices (-1 when the objective has no table)
    lang_b: torch.Tensor
    num_pairs: int  # this process's pairs
    global_pairs: int  # pairs of the whole global batch (all processes)

    def to(self, device: torch.device | str) -> PairBatch:
        return PairBatch(
            self.clean.to(device),
            self.lang_a.to(device),
            self.lang_b.to(device),
            self.num_pairs,
            self.global_pairs,
        )


def language_index(
    pairs: Sequence[TranslationPair], languages: Sequence[str], recipe_key: str
) -> dict[str, int]:
    """Index of every language of ``languages``; fails, naming ``recipe_key``, if a pair's language
    is missing or not in the table (the head would otherwise learn from a wrong language id)."""
    table = {lang: i for i, lang in enumerate(languages)}
    for number, pair in enumerate(pairs, start=1):
        for lang in (pair.lang_a, pair.lang_b):
            if not lang or not is_language_code(lang):
                raise ValueError(
                    f"translation pair {number} has no language code ({lang!r}); the objective needs the "
                    f"language of every sentence: give data.parallel files whose header names each "
                    f"column's language"
                )
            if lang not in table:
                raise ValueError(
                    f"translation pair {number} is in language {lang!r}, which {recipe_key} "
                    f"({', '.join(languages)}) does not list; add it, or set {recipe_key}: null to take "
                    f"the languages of the training data"
                )
    return table


def tokenize_pairs(
    pairs: Sequence[TranslationPair],
    backbone: Backbone,
    max_length: int,
    table: dict[str, int] | None = None,
) -> list[LanguagePair]:
    ids_a = backbone.tokenize([p.text_a for p in pairs], max_length)
    ids_b = backbone.tokenize([p.text_b for p in pairs], max_length)
    table = table or {}
    return [
        LanguagePair(a, b, table.get(p.lang_a, -1), table.get(p.lang_b, -1))
        for a, b, p in zip(ids_a, ids_b, pairs)
    ]


def collate_pairs(
    examples: Sequence[TokenizedPair], backbone: Backbone, rank: int = 0, world_size: int = 1
) -> PairBatch:
    mine = shard(list(range(len(examples))), rank, world_size)
    chosen = [examples[i] for i in mine]
    return PairBatch(
        clean=PackedBatch.from_ids(
            [ex.ids_a for ex in chosen] + [ex.ids_b for ex in chosen], backbone.position_offset
        ),
        lang_a=torch.tensor([getattr(ex, "lang_a", -1) for ex in chosen], dtype=torch.long),
        lang_b=torch.tensor([getattr(ex, "lang_b", -1) for ex in chosen], dtype=torch.long),
        num_pairs=len(chosen),
        global_pairs=len(examples),
    )


class PairObjective(Objective):
    """An objective over packed translation pairs with no per-batch randomness (EMS, contrastive):
    pairs are tokenised with their language ids and each process takes its shard of a batch."""

    def prepare(
        self, pairs: Sequence[TranslationPair], backbone: Backbone, max_length: int
    ) -> list[TokenizedPair]:
        return tokenize_pairs(pairs, backbone, max_length)

    def collate(
        self,
        examples: Sequence[TokenizedPair],
        rng: np.random.Generator,
        backbone: Backbone,
        rank: int = 0,
        world_size: int = 1,
    ) -> PairBatch:
        return collate_pairs(examples, backbone, rank, world_size)
