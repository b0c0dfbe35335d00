"""The ``cla`` recipe section and the adapters config it builds (adapters' defaults)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from modsenc.modules.kinds.stage import Schedule
from modsenc.utils.config import RecipeError

if TYPE_CHECKING:
    from adapters import ParBnConfig

CLA_VARIANTS = ("pp", "pl", "jt")
PARALLEL_LOSSES = ("cosine", "distill")
OWN_SOURCES = ("backbone", "modules")  # whose vector of the sentence a distilled CLA also targets
STRUCTURE_SOURCES = ("modules", "pivot")  # whose in-batch similarities a distilled CLA keeps


@dataclass
class CLAConfig(Schedule):
    """``cla``: the cross-lingual alignment adapter (adapters' ParBnConfig), aligned to the pivot."""

    variant: str = "jt"  # pp: cross-lingual paraphrases | pl: parallel pairs | jt: both, alternating batches
    # The loss of the parallel batches: cosine (the paper: CosineSimilarityLoss onto the pivot's
    # vector) or distill (DistillationLoss: the unit vector regressed onto the pivot's).
    parallel_loss: str = "cosine"
    # distill only: weight λ of the sentence's own vector (own_source, below) in the target
    # (t_pivot + λ t_own) / (1 + λ), which keeps the language's monolingual neighbourhood.
    own_weight: float = 0.0
    # distill only: whose vector of the sentence itself that target holds. backbone: the bare
    # backbone's; modules: the language's modules before the CLA (what mode "mono" gives), so
    # that the CLA keeps what the SE learnt about the language when both are applied.
    own_source: str = "backbone"
    # distill only: weight of an in-batch ranking loss (MNRL both ways) between the sentences and
    # their translations' pivot vectors, added to the regression: it asks that each sentence land
    # nearer its own translation than the batch's other ones, which is what mining measures.
    ranking_weight: float = 0.0
    # distill, with a ranking weight: LaBSE's additive margin (Yang et al., 2019), taken off each
    # translation's cosine in that ranking, so it must beat the others by at least this much.
    ranking_margin: float = 0.0
    # distill, with a ranking weight: this many hard negatives a pair, the training pairs' other
    # pivot sentences whose pivot vectors are nearest its translation's, join the ranking's
    # candidates (fixed vectors: no extra encoding). Candidates at or above
    # hard_negative_max_similarity to the translation (near-duplicates, likely paraphrases of it)
    # are skipped: ranked against them, a correct student would be pushed off its translation.
    hard_negatives: int = 0
    hard_negative_max_similarity: float = 0.95
    # distill only: weight of the similarity-preserving term (SimilarityPreservingLoss): each
    # batch's sentences keep, with the CLA on, the ordering of their similarities to each other
    # that the teacher named by structure_source gives them, so the shared space (mode "cross")
    # does not flatten the language's own neighbourhoods.
    structure_weight: float = 0.0
    # Whose similarities that term keeps. modules: the language's own sentences through its
    # modules without the CLA (the SE's geometry); pivot: their translations' pivot vectors (the
    # geometry the alignment aims at, e5's English for the shipped recipe).
    structure_source: str = "modules"
    # Parallel pairs of these other languages with the pivot (their data.per_language files) are
    # added to the language's own: the alignment learns from related languages' translations too,
    # and is still applied to this language's text only. LANG and the pivot are skipped, so one
    # list can serve every language.
    transfer_languages: list[str] = field(default_factory=list)
    adapter: dict[str, Any] = field(default_factory=dict)  # ParBnConfig arguments, e.g. reduction_factor
    scale: float = 20.0
    epochs: float | None = 3.0
    batch_size: int = 16

    def validate(self, where: str) -> None:
        if self.variant not in CLA_VARIANTS:
            raise RecipeError(f"{where}.variant must be one of {CLA_VARIANTS}, got {self.variant!r}")
        if self.parallel_loss not in PARALLEL_LOSSES:
            raise RecipeError(
                f"{where}.parallel_loss must be one of {PARALLEL_LOSSES}, got {self.parallel_loss!r}"
            )
        if self.own_source not in OWN_SOURCES:
            raise RecipeError(f"{where}.own_source must be one of {OWN_SOURCES}, got {self.own_source!r}")
        if self.structure_source not in STRUCTURE_SOURCES:
            raise RecipeError(
                f"{where}.structure_source must be one of {STRUCTURE_SOURCES}, got {self.structure_source!r}"
            )
        if self.own_weight < 0:
            raise RecipeError(f"{where}.own_weight must be >= 0, got {self.own_weight}")
        for name in ("ranking_weight", "structure_weight", "ranking_margin", "hard_negatives"):
            if getattr(self, name) < 0:
                raise RecipeError(f"{where}.{name} must be >= 0, got {getattr(self, name)}")
            if getattr(self, name) > 0 and self.parallel_loss != "distill":
                raise RecipeError(
                    f"{where}.{name} applies to parallel_loss: distill only, got {self.parallel_loss!r}"
                )
        for name in ("ranking_margin", "hard_negatives"):
            if getattr(self, name) > 0 and self.ranking_weight == 0:
                raise RecipeError(f"{where}.{name} shapes the ranking term: set {where}.ranking_weight > 0")
        if not -1 < self.hard_negative_max_similarity <= 1:
            raise RecipeError(
                f"{where}.hard_negative_max_similarity is a cosine in (-1, 1], got "
                f"{self.hard_negative_max_similarity}"
            )


def alignment_adapter_config(**overrides: Any) -> ParBnConfig:
    """CLA: a parallel bottleneck adapter beside each feed-forward block (adapters' defaults)."""
    from adapters import ParBnConfig  # noqa: PLC0415 - recipes are read without adapters

    return ParBnConfig(**overrides)
