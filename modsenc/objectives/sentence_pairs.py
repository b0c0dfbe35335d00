"""Sentence-pair objectives for the SE and CLA adapters, with sentence-transformers' losses.

* ``paraphrase`` batches (anchor, positive[, hard negative]): ``MultipleNegativesRankingLoss``
  (in-batch negatives, cosine similarity, scale 20). Negatives, where a pair has one, join the
  candidate pool of every anchor.
* ``parallel`` batches (sentence, translation): ``CosineSimilarityLoss`` with target 1.
* ``distill`` batches (sentence, fixed teacher vector): ``DistillationLoss``, the squared distance
  of the unit student vector to the teacher's (multilingual knowledge distillation). With a
  ``ranking_weight``, plus that weight times LaBSE's bidirectional in-batch softmax between the
  students and the batch's pivot vectors (``AdditiveMarginSoftmaxLoss`` halved: at margin 0 it is
  ``MultipleNegativesSymmetricRankingLoss``), each translation ranked against the others in both
  directions, which the regression alone does not ask for: the target says where a sentence
  should land, the ranking term that it lands nearer its own translation than the others'. A
  ``ranking_margin`` takes LaBSE's additive margin off each translation's similarity; a pair's
  ``negative_vectors`` (hard negatives: pivot vectors of other sentences near its translation)
  join the candidates each student is ranked against.
  With a ``structure_weight``, plus that weight times ``SimilarityPreservingLoss`` between the
  students and a teacher's vectors of the same pairs (``structure_vector``: the sentences through
  the language's modules without the CLA, or their translations' pivot vectors; add-language's
  ``cla.structure_source``): the batch's sentences keep the ordering of their similarities to each
  other that the teacher gives them, so aligning onto the pivot does not flatten it.

The anchor side is either text run through the trained model (SE: monolingual paraphrases) or a
fixed vector (CLA: the frozen English pivot's embedding, computed once through its own modules).
The losses are used through their ``compute_loss_from_embeddings``: the embeddings come from the
packed backbone, so the losses hold no model (``model=None``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from sentence_transformers.sentence_transformer.losses import (
    CosineSimilarityLoss,
    MultipleNegativesRankingLoss,
)

from modsenc.backbone.encoder import Backbone
from modsenc.backbone.packing import PackedBatch
from modsenc.backbone.precision import full_precision
from modsenc.objectives.base import Objective, ObjectiveOutput
from modsenc.objectives.losses.additive_margin import AdditiveMarginSoftmaxLoss
from modsenc.objectives.losses.distillation import DistillationLoss
from modsenc.objectives.losses.similarity_preserving import SimilarityPreservingLoss
from modsenc.utils.distributed import DistContext

KINDS = ("paraphrase", "parallel", "distill")


@dataclass
class SentencePairExample:
    kind: str  # "paraphrase" (MNRL), "parallel" (cosine) or "distill" (onto a teacher vector)
    positive_ids: list[int]
    anchor_ids: list[int] | None = None  # text anchor, encoded by the trained model
    anchor_vector: torch.Tensor | None = None  # or a fixed vector (the pivot's, for CLA pairs)
    negative_ids: list[int] | None = None
    # distill only: the regression target, where it is not the anchor vector itself (a blend of
    # the pivot's vector and the sentence's own); the anchor vector is then what the ranking uses
    target_vector: torch.Tensor | None = None
    # distill only: the teacher's vector of the pair (the sentence without the CLA, or its
    # translation's pivot vector), whose in-batch similarities the structure term preserves
    structure_vector: torch.Tensor | None = None
    # distill only: hard negatives, (k, dim) pivot vectors of other sentences near the translation,
    # which join the candidates the ranking term ranks this sentence against
    negative_vectors: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if (self.anchor_ids is None) == (self.anchor_vector is None):
            raise ValueError("give exactly one of anchor_ids and anchor_vector")
        extras = (self.target_vector, self.structure_vector, self.negative_vectors)
        if any(v is not None for v in extras) and self.kind != "distill":
            raise ValueError(
                f"only distill pairs take a target, structure or negative vectors, not {self.kind!r} pairs"
            )

    @property
    def length(self) -> int:
        lengths = [len(self.positive_ids)]
        if self.anchor_ids is not None:
            lengths.append(len(self.anchor_ids))
        if self.negative_ids is not None:
            lengths.append(len(self.negative_ids))
        return max(lengths)


def pair_examples(
    tokenize: Callable[[list[str]], list[list[int]]],
    kind: str,
    positives: Sequence[str],
    negatives: Sequence[str | None],
    anchors: Sequence[str] | Sequence[torch.Tensor],
    targets: Sequence[torch.Tensor] | None = None,
    structure: Sequence[torch.Tensor] | None = None,
) -> list[SentencePairExample]:
    """Tokenised (anchor, positive[, negative]) examples; anchors are texts or fixed vectors;
    ``targets``: distill pairs' regression targets where they are not the anchors; ``structure``:
    the teacher's vectors of the pairs, for the structure term."""
    positive_ids = tokenize(list(positives))
    with_negative = [i for i, n in enumerate(negatives) if n]
    negative_ids = dict(zip(with_negative, tokenize([negatives[i] for i in with_negative])))
    text_anchors = bool(anchors) and isinstance(anchors[0], str)
    anchor_ids = tokenize(list(anchors)) if text_anchors else None
    return [
        SentencePairExample(
            kind,
            positive_ids[i],
            anchor_ids=anchor_ids[i] if text_anchors else None,
            anchor_vector=None if text_anchors else anchors[i],
            negative_ids=negative_ids.get(i),
            target_vector=None if targets is None else targets[i],
            structure_vector=None if structure is None else structure[i],
        )
        for i in range(len(positives))
    ]


@dataclass
class SentencePairBatch:
    kind: str
    texts: PackedBatch  # [anchors (if text)] + positives + negatives, in that order
    num_pairs: int
    num_negatives: int
    text_anchors: bool
    anchor_vectors: torch.Tensor | None
    target_vectors: torch.Tensor | None = None  # distill targets, where they differ from the anchors
    structure_vectors: torch.Tensor | None = None  # distill: the structure term's teacher vectors
    negative_vectors: torch.Tensor | None = None  # distill: every pair's hard negatives, stacked

    def to(self, device: torch.device | str) -> SentencePairBatch:
        def moved(tensor: torch.Tensor | None) -> torch.Tensor | None:
            return None if tensor is None else tensor.to(device)

        return SentencePairBatch(
            self.kind,
            self.texts.to(device),
            self.num_pairs,
            self.num_negatives,
            self.text_anchors,
            moved(self.anchor_vectors),
            moved(self.target_vectors),
            moved(self.structure_vectors),
            moved(self.negative_vectors),
        )


class SentencePairObjective(Objective):
    name = "sentence_pairs"

    def __init__(
        self,
        scale: float = 20.0,
        ranking_weight: float = 0.0,
        structure_weight: float = 0.0,
        ranking_margin: float = 0.0,
    ) -> None:
        super().__init__()
        settings = {
            "ranking_weight": ranking_weight,
            "structure_weight": structure_weight,
            "ranking_margin": ranking_margin,
        }
        for name, value in settings.items():
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        self.scale = scale
        self.ranking_weight = ranking_weight  # of the ranking term of distill batches
        self.structure_weight = structure_weight  # of their similarity-preserving term
        self.ranking_margin = ranking_margin  # LaBSE's additive margin in that ranking term
        self.mnrl = MultipleNegativesRankingLoss(model=None, scale=scale)
        self.ranking = AdditiveMarginSoftmaxLoss(margin=ranking_margin, scale=scale)
        self.cosine = CosineSimilarityLoss(model=None)
        self.distill = DistillationLoss()
        self.structure = SimilarityPreservingLoss()

    def config_dict(self) -> dict:
        return {
            "scale": self.scale,
            "paraphrase_loss": "MultipleNegativesRankingLoss",
            "parallel_loss": "CosineSimilarityLoss",
            "distill_loss": "DistillationLoss",
            "distill_ranking_loss": "AdditiveMarginSoftmaxLoss / 2",
            "distill_ranking_weight": self.ranking_weight,
            "distill_ranking_margin": self.ranking_margin,
            "distill_structure_loss": "SimilarityPreservingLoss",
            "distill_structure_weight": self.structure_weight,
        }

    def collate(
        self,
        examples: Sequence[SentencePairExample],
        rng: np.random.Generator,
        backbone: Backbone,
        rank: int = 0,
        world_size: int = 1,
    ) -> SentencePairBatch:
        kinds = {ex.kind for ex in examples}
        if len(kinds) != 1:
            raise ValueError(f"a batch must hold one kind of pair, got {sorted(kinds)}")
        text_anchors = examples[0].anchor_ids is not None
        if any((ex.anchor_ids is not None) != text_anchors for ex in examples):
            raise ValueError("a batch must not mix text anchors and vector anchors")
        sequences: list[list[int]] = []
        if text_anchors:
            sequences += [ex.anchor_ids for ex in examples]
        sequences += [ex.positive_ids for ex in examples]
        negatives = [ex.negative_ids for ex in examples if ex.negative_ids is not None]
        sequences += negatives
        vectors = None if text_anchors else torch.stack([ex.anchor_vector for ex in examples])
        with_target = [ex.target_vector is not None for ex in examples]
        if any(with_target) and not all(with_target):
            raise ValueError("a batch must not mix pairs with and without a target_vector")
        targets = torch.stack([ex.target_vector for ex in examples]) if all(with_target) else None
        with_structure = [ex.structure_vector is not None for ex in examples]
        if any(with_structure) and not all(with_structure):
            raise ValueError("a batch must not mix pairs with and without a structure_vector")
        structure = torch.stack([ex.structure_vector for ex in examples]) if all(with_structure) else None
        with_negatives = [ex.negative_vectors is not None for ex in examples]
        if any(with_negatives) and not all(with_negatives):
            raise ValueError("a batch must not mix pairs with and without negative_vectors")
        negative_vectors = None
        if all(with_negatives):
            negative_vectors = torch.cat([ex.negative_vectors for ex in examples])
        return SentencePairBatch(
            kind=kinds.pop(),
            texts=PackedBatch.from_ids(sequences, backbone.position_offset),
            num_pairs=len(examples),
            num_negatives=len(negatives),
            text_anchors=text_anchors,
            anchor_vectors=vectors,
            target_vectors=targets,
            structure_vectors=structure,
            negative_vectors=negative_vectors,
        )

    def distill_loss(
        self,
        students: torch.Tensor,
        pivots: torch.Tensor,
        targets: torch.Tensor | None = None,
        structure: torch.Tensor | None = None,
        negatives: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """A distill batch's loss: the regression onto ``targets`` (the ``pivots`` themselves when
        None), plus ``ranking_weight`` times the symmetric in-batch ranking of students and pivots
        (``negatives``, hard-negative pivot vectors, join the students' candidates), plus
        ``structure_weight`` times the similarity-preserving term against ``structure`` (the
        teacher's vectors of the same pairs); and each term's value, for the logs."""
        loss = self.distill(students, pivots if targets is None else targets)
        terms = {"distill_regression": loss.item()}
        if negatives is not None and self.ranking_weight == 0:
            raise ValueError("hard negatives need ranking_weight > 0: only the ranking term uses them")
        if self.ranking_weight > 0:
            # (L + L') / 2: the mean of the two directions, as MultipleNegativesSymmetricRankingLoss
            ranking = self.ranking(students, pivots, negatives) / 2
            loss = loss + self.ranking_weight * ranking
            terms["distill_ranking"] = ranking.item()
        if self.structure_weight > 0:
            if structure is None:
                raise ValueError(
                    "structure_weight > 0 needs each pair's structure_vector (its teacher's vector)"
                )
            if len(students) >= 3:  # a short last batch has no ordering of neighbours to keep
                kept = self.structure(students, structure)
                loss = loss + self.structure_weight * kept
                terms["distill_structure"] = kept.item()
        return loss, terms

    def forward(self, backbone: Backbone, batch: SentencePairBatch, dist: DistContext) -> ObjectiveOutput:
        vectors = backbone.sentence_embedding(backbone(batch.texts), batch.texts)
        n = batch.num_pairs
        if batch.text_anchors:
            anchors, vectors = vectors[:n], vectors[n:]
        else:
            anchors = batch.anchor_vectors
        positives, negatives = vectors[:n], vectors[n:]
        terms: dict[str, float] = {}  # a distill batch's terms, each logged beside the total
        with full_precision(positives):  # similarity matrices and losses in fp32 under bf16 autocast
            if batch.kind == "paraphrase":
                embeddings = [anchors, positives] + ([negatives] if batch.num_negatives else [])
                loss = self.mnrl.compute_loss_from_embeddings(embeddings, None)
            elif batch.kind == "distill":
                if batch.text_anchors:
                    raise ValueError("distill pairs need fixed teacher vectors as anchors, not texts")
                loss, terms = self.distill_loss(
                    positives, anchors, batch.target_vectors, batch.structure_vectors, batch.negative_vectors
                )
            else:
                loss = self.cosine.compute_loss_from_embeddings(
                    [anchors, positives], torch.ones(n, device=anchors.device)
                )
        with torch.no_grad():
            sims = F.normalize(anchors.float(), dim=-1) @ F.normalize(positives.float(), dim=-1).T
            accuracy = (sims.argmax(-1) == torch.arange(n, device=sims.device)).float().mean()
        return ObjectiveOutput(
            loss=loss,
            metrics={
                "loss": loss.item(),
                f"{batch.kind}_loss": loss.item(),
                f"{batch.kind}_acc": float(accuracy),
                **terms,
            },
            num_tokens=batch.texts.num_tokens,
        )
