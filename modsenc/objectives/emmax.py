"""EMMA-X (Guo et al., NeurIPS 2023): an EM-like algorithm that learns cross-lingual semantic
relations with a GMM classifier and uses non-parallel text.

Sentence vectors γ are the backbone's pooled vectors, L2-normalised. A GMM relation classifier
(losses/gmm_relation.py) scores the difference γ(x) − γ(y) into N semantic ranks.

Phase 1 (parallel pairs): the encoder learns by symmetric InfoNCE; the GMM by the likelihood of
rank labels known by construction: a translation pair is rank 1, and an embedding mixup
γ(ỹ) = (1−λ)γ(y) + λγ(y′) with another sentence y′ of the batch is rank r = ⌈(1−λ)·1 + λ·N⌉.

Phase 2 (EM on non-parallel text: monolingual sentences and paraphrase pairs): queries x go through
the encoder, keys (the sentence itself, or its paraphrase) through a momentum copy of it
(MoCo; momentum 0.999) and into a queue of K = 256. Candidates = this batch's keys + the queue.
E-step: c*_G = argmax_r P_G(r | x, y) and c*_M = argmin_r |s(x, y) − s_r| with moving-average
rank anchors s_r. M-step: the GMM learns −log P_G(c*_M | x, y) (inputs detached), the encoder a
rank-InfoNCE (losses/rank_infonce.py) with the GMM's labels c*_G; neither loss reaches the other
module. The choices the paper leaves open are argued in docs/design.md ("EMMA-X").
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from modsenc.backbone.encoder import Backbone
from modsenc.backbone.packing import PackedBatch
from modsenc.data.batching import shard
from modsenc.data.readers import TranslationPair
from modsenc.objectives.base import Objective, ObjectiveOutput, TokenizedPair
from modsenc.objectives.losses.gmm_relation import GaussianMixtureRelation
from modsenc.objectives.losses.infonce_alignment import InfoNCEAlignmentLoss
from modsenc.objectives.losses.rank_infonce import RankInfoNCELoss
from modsenc.objectives.pairs import PairBatch, collate_pairs, tokenize_pairs
from modsenc.utils.config import Section
from modsenc.utils.distributed import DistContext

NON_PARALLEL_KEYS = (
    "data.monolingual (text files, one sentence per line) and/or data.paraphrase (paraphrase TSVs)"
)


def mixup_rank(lam: float, ranks: int) -> int:
    """EMMA-X's rank of a mixup ỹ = (1−λ)y + λy′: ⌈(1−λ)·1 + λ·N⌉, 1-based. Rounded to 9 decimals
    first so that float noise (1 − 1/3 + 4/3 = 2.0000000000000004) does not push a boundary λ up a rank."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"mixup λ must be in [0, 1], got {lam}")
    return max(1, math.ceil(round((1 - lam) * 1 + lam * ranks, 9)))


@dataclass
class EMMAXConfig(Section):
    ranks: int = 4  # N semantic ranks
    temperature: float = 0.05  # phase-1 InfoNCE
    rank_temperatures: list[float] | None = None  # τ_1 < … < τ_N; default 0.05 · 2^(r−1)
    queue_size: int = 256  # K
    momentum: float = 0.999  # of the key encoder
    anchor_momentum: float = 0.9  # of the rank anchors s_r
    gmm_momentum: float = 0.9  # of the GMM's μ_r, σ_r² following phase-1 moments (1: gradient only)
    phase1_steps: int = 100  # warm-up batches of phase 1 only
    phase2_every: int = 2  # afterwards every k-th batch is phase 2 (1: phase 2 only; 0: never)
    gmm_weight: float = 1.0  # the GMM's loss is added to the encoder's; they share no parameters

    zero_allowed: ClassVar[tuple[str, ...]] = ("phase2_every",)

    def __post_init__(self) -> None:
        if self.ranks < 2:
            raise ValueError(f"objective.emmax.ranks must be >= 2, got {self.ranks}")
        if self.rank_temperatures is None:
            self.rank_temperatures = [0.05 * 2**r for r in range(self.ranks)]
        if len(self.rank_temperatures) != self.ranks:
            raise ValueError(
                f"objective.emmax.rank_temperatures needs {self.ranks} values (one per rank), "
                f"got {self.rank_temperatures}"
            )
        if not 0.0 <= self.momentum < 1.0 or not 0.0 <= self.anchor_momentum < 1.0:
            raise ValueError("objective.emmax.momentum and anchor_momentum must be in [0, 1)")
        if not 0.0 <= self.gmm_momentum <= 1.0:
            raise ValueError(f"objective.emmax.gmm_momentum must be in [0, 1], got {self.gmm_momentum}")
        if self.queue_size < 1 or self.phase1_steps < 0 or self.phase2_every < 0:
            raise ValueError("objective.emmax: queue_size >= 1, phase1_steps >= 0 and phase2_every >= 0")


@dataclass
class NonParallelExample:
    query_ids: list[int]
    key_ids: list[int]


@dataclass
class EMMAXBatch:
    phase: int
    pairs: PairBatch | None = None  # phase 1
    mixup_lambda: torch.Tensor | None = None  # (global pairs,) λ of each pair's mixup
    mixup_partner: torch.Tensor | None = None  # (global pairs,) index of y′ in the global batch
    queries: PackedBatch | None = None  # phase 2, this process's share
    keys: PackedBatch | None = None

    @property
    def num_tokens(self) -> int:
        return self.pairs.clean.num_tokens if self.pairs is not None else self.queries.num_tokens

    def to(self, device: torch.device | str) -> EMMAXBatch:
        def move(x):
            return None if x is None else x.to(device)

        return EMMAXBatch(
            self.phase,
            move(self.pairs),
            move(self.mixup_lambda),
            move(self.mixup_partner),
            move(self.queries),
            move(self.keys),
        )


class EMMAXObjective(Objective):
    name = "emmax"

    def __init__(
        self,
        backbone: Backbone,
        config: EMMAXConfig | None = None,
        non_parallel: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__()
        self.config = cfg = config or EMMAXConfig()
        self.non_parallel = list(non_parallel)
        if cfg.phase2_every and not self.non_parallel:
            raise ValueError(
                f"EMMA-X phase 2 trains on non-parallel text: set {NON_PARALLEL_KEYS} in the recipe "
                "(or objective.emmax.phase2_every: 0 for phase 1 only)"
            )
        d = backbone.hidden_size
        self.gmm = GaussianMixtureRelation(d, cfg.ranks)
        self.infonce = InfoNCEAlignmentLoss(cfg.temperature)
        self.rank_infonce = RankInfoNCELoss(cfg.rank_temperatures)
        # The key encoder: a momentum copy of the backbone, never trained by gradients. Its weights
        # are part of this module's state, so a resumed run continues with the same keys.
        self.key_encoder = copy.deepcopy(backbone).requires_grad_(False)
        self.register_buffer("queue", torch.zeros(cfg.queue_size, d))
        self.register_buffer("queue_filled", torch.zeros((), dtype=torch.long))
        self.register_buffer("queue_pointer", torch.zeros((), dtype=torch.long))
        self.register_buffer("anchors", torch.zeros(cfg.ranks))
        self.register_buffer("anchors_seen", torch.zeros(cfg.ranks, dtype=torch.bool))
        self.register_buffer("gmm_fitted", torch.zeros(cfg.ranks, dtype=torch.bool))
        # Micro-batches trained so far: picks each batch's phase, and is checkpointed with the rest.
        self.register_buffer("batches_seen", torch.zeros((), dtype=torch.long))
        self.pool: list[NonParallelExample] = []

    def config_dict(self) -> dict:
        return {**asdict(self.config), "non_parallel_items": len(self.non_parallel)}

    def phase_of(self, batch_index: int) -> int:
        cfg = self.config
        if batch_index < cfg.phase1_steps or not cfg.phase2_every:
            return 1
        return 2 if (batch_index - cfg.phase1_steps) % cfg.phase2_every == 0 else 1

    # ------------------------------------------------------------------ data
    def prepare(
        self, pairs: Sequence[TranslationPair], backbone: Backbone, max_length: int
    ) -> list[TokenizedPair]:
        if self.non_parallel:
            queries = backbone.tokenize([q for q, _ in self.non_parallel], max_length)
            keys = backbone.tokenize([k for _, k in self.non_parallel], max_length)
            self.pool = [NonParallelExample(q, k) for q, k in zip(queries, keys)]
        return tokenize_pairs(pairs, backbone, max_length)

    def collate(
        self,
        examples: Sequence[TokenizedPair],
        rng: np.random.Generator,
        backbone: Backbone,
        rank: int = 0,
        world_size: int = 1,
    ) -> EMMAXBatch:
        size = len(examples)
        if self.phase_of(int(self.batches_seen)) == 1:
            # λ ∈ (0, 1]: λ = 0 would be the translation itself, which is already a rank-1 item.
            lam = 1.0 - rng.random(size)
            return EMMAXBatch(
                phase=1,
                pairs=collate_pairs(examples, backbone, rank, world_size),
                mixup_lambda=torch.tensor(lam, dtype=torch.float),
                mixup_partner=(torch.arange(size) + 1) % size,  # y′ = the next pair's translation
            )
        if not self.pool:
            raise RuntimeError("EMMA-X phase 2: prepare() has not tokenised the non-parallel text")
        # A phase-2 batch takes as many non-parallel items as a phase-1 batch has pairs; the
        # parallel batch the sampler gave for this step goes unused.
        drawn = rng.choice(len(self.pool), size=min(size, len(self.pool)), replace=False)
        mine = [self.pool[int(drawn[i])] for i in shard(list(range(len(drawn))), rank, world_size)]
        return EMMAXBatch(
            phase=2,
            queries=PackedBatch.from_ids([ex.query_ids for ex in mine], backbone.position_offset),
            keys=PackedBatch.from_ids([ex.key_ids for ex in mine], backbone.position_offset),
        )

    # ------------------------------------------------------------------ loss
    def forward(
        self, backbone: Backbone, batch: EMMAXBatch, dist: DistContext | None = None
    ) -> ObjectiveOutput:
        dist = dist or DistContext()
        if self.training:
            self.batches_seen += 1
        if batch.phase == 1:
            return self._phase1(backbone, batch, dist)
        return self._phase2(backbone, batch, dist)

    def _update_anchors(self, similarity: torch.Tensor, ranks: torch.Tensor) -> None:
        """s_r ← m·s_r + (1−m)·mean similarity of this batch's items of rank r (0-based ranks); the
        first batch that has items of a rank sets its anchor outright."""
        if not self.training:
            return
        with torch.no_grad():
            one_hot = F.one_hot(ranks.reshape(-1), self.config.ranks).float()
            counts = one_hot.sum(0)
            means = (one_hot * similarity.reshape(-1, 1).float()).sum(0) / counts.clamp_min(1)
            present = counts > 0
            m = self.config.anchor_momentum
            blended = torch.where(self.anchors_seen, m * self.anchors + (1 - m) * means, means)
            self.anchors.copy_(torch.where(present, blended, self.anchors))
            self.anchors_seen |= present

    def _phase1(self, backbone: Backbone, batch: EMMAXBatch, dist: DistContext) -> ObjectiveOutput:
        pairs = batch.pairs
        n = pairs.num_pairs
        gamma = F.normalize(backbone.sentence_embedding(backbone(pairs.clean), pairs.clean).float(), dim=-1)
        x = dist.all_gather_with_grad(gamma[:n])
        y = dist.all_gather_with_grad(gamma[n:])
        encoder_loss = self.infonce(x, y)

        # The GMM sees detached vectors: its loss never reaches the encoder.
        xd, yd = x.detach(), y.detach()
        lam = batch.mixup_lambda[:, None]
        y_mix = (1 - lam) * yd + lam * yd[batch.mixup_partner]
        ranks = torch.tensor(
            [mixup_rank(float(v), self.config.ranks) - 1 for v in batch.mixup_lambda.tolist()],
            device=xd.device,
        )
        # Both signs of every labelled difference: the relation of x and y is the relation of y and
        # x, and phase 1's pairs all run one way (x English, y the other language). One-way
        # differences fit μ_r to that language direction, and phase 2's same-language differences
        # (q − k ≈ 0 for a sentence and its own key) then sit far from every rank's mean.
        z = torch.cat([xd - yd, xd - y_mix, yd - xd, y_mix - xd])
        labels = torch.cat([torch.zeros_like(ranks), ranks]).repeat(2)
        if self.training:
            # Gradient steps move log σ by about the learning rate per step, far too slowly for
            # the scale of the differences: each rank starts from the moment (ML) estimate on the
            # first batch that has items of that rank, and then follows the moments of every
            # phase-1 batch's labelled items (momentum gmm_momentum) as the encoder moves them.
            # Frozen at the first batch, the GMM labelled phase 2 by differences the encoder had
            # long left, and its E-step put every candidate in one rank (docs/design.md, "EMMA-X").
            fitted = self.gmm_fitted.clone()
            if not bool(fitted.all()):
                self.gmm_fitted |= self.gmm.fit_moments(z, labels, only=~fitted)
            if self.config.gmm_momentum < 1.0:
                track = labels.clone()
                track[~fitted[labels]] = -1  # a rank fitted by this very batch is not moved twice
                self.gmm.track_moments(z, track, self.config.gmm_momentum)
        gmm_loss = self.gmm(z, labels) / z.shape[0]
        similarity = torch.cat([(xd * yd).sum(-1), (xd * F.normalize(y_mix, dim=-1)).sum(-1)])
        anchors_before = self.anchors.clone()
        self._update_anchors(similarity, labels[: similarity.shape[0]])

        loss = encoder_loss + self.config.gmm_weight * gmm_loss
        return ObjectiveOutput(
            loss=loss,
            metrics={
                "loss": float(loss.detach()),
                "infonce": float(encoder_loss.detach()),
                "gmm": float(gmm_loss.detach()),
                **self._anchor_metrics(anchors_before),
            },
            num_tokens=pairs.clean.num_tokens,
            extras={"encoder_loss": encoder_loss, "gmm_loss": gmm_loss, "gmm_labels": labels},
        )

    @torch.no_grad()
    def _momentum_update(self, backbone: Backbone) -> None:
        m = self.config.momentum
        for key_param, param in zip(self.key_encoder.parameters(), backbone.parameters()):
            key_param.mul_(m).add_(param.detach(), alpha=1 - m)

    @torch.no_grad()
    def _enqueue(self, keys: torch.Tensor) -> None:
        size = self.queue.shape[0]
        keys = keys[-size:]
        slots = (self.queue_pointer + torch.arange(keys.shape[0], device=keys.device)) % size
        self.queue[slots] = keys.to(self.queue.dtype)
        self.queue_pointer.copy_((self.queue_pointer + keys.shape[0]) % size)
        self.queue_filled.copy_(torch.clamp(self.queue_filled + keys.shape[0], max=size))

    def _anchor_metrics(self, before: torch.Tensor) -> dict[str, float]:
        """Each anchor s_r and how far this step moved them (the largest |Δs_r|): the logged trace
        of the similarity scale the E-step's c*_M labels are read against."""
        values = {f"anchor_{r + 1}": float(v) for r, v in enumerate(self.anchors.tolist())}
        return values | {"anchor_drift": float((self.anchors - before).abs().max())}

    def _rank_histogram(self, prefix: str, ranks: torch.Tensor) -> dict[str, float]:
        """The share of items in each rank (1-based keys): a collapse shows as one share near 1."""
        counts = torch.bincount(ranks.reshape(-1), minlength=self.config.ranks).float()
        shares = counts / counts.sum().clamp_min(1)
        return {f"{prefix}_r{r + 1}": float(v) for r, v in enumerate(shares.tolist())}

    def _phase2_metrics(
        self,
        loss: torch.Tensor,
        encoder_loss: torch.Tensor,
        gmm_loss: torch.Tensor,
        estep_gmm: torch.Tensor,
        estep_anchor: torch.Tensor,
        unlabelled: torch.Tensor,
    ) -> dict[str, float]:
        """A phase-2 step's losses, how often the E-step's two labellings agree, their ranks of the
        candidates ``unlabelled`` by construction, and the anchors."""
        return {
            "loss": float(loss.detach()),
            "rank_infonce": float(encoder_loss.detach()),
            "gmm": float(gmm_loss.detach()),
            "rank_agreement": float(
                (estep_gmm == estep_anchor)[unlabelled].float().mean() if unlabelled.any() else 1.0
            ),
            **self._rank_histogram("estep_gmm", estep_gmm[unlabelled]),
            **self._rank_histogram("estep_anchor", estep_anchor[unlabelled]),
            **self._anchor_metrics(self.anchors),
        }

    def _phase2(self, backbone: Backbone, batch: EMMAXBatch, dist: DistContext) -> ObjectiveOutput:
        queries = F.normalize(
            backbone.sentence_embedding(backbone(batch.queries), batch.queries).float(), dim=-1
        )
        q = dist.all_gather_with_grad(queries)
        with torch.no_grad():
            if self.training:
                self._momentum_update(backbone)
            keys = F.normalize(
                self.key_encoder.sentence_embedding(self.key_encoder(batch.keys), batch.keys).float(), dim=-1
            )
            k = dist.all_gather_with_grad(keys)
            candidates = torch.cat([k, self.queue[: int(self.queue_filled)]])
            difference = q.detach()[:, None, :] - candidates[None]
            similarity_fixed = q.detach() @ candidates.T
            # Query i's own key (the sentence through the key encoder, or its paraphrase) is
            # candidate i: a rank-1 item by construction, as a translation is in phase 1.
            own = torch.zeros_like(similarity_fixed, dtype=torch.bool)
            own[torch.arange(q.shape[0]), torch.arange(q.shape[0])] = True
            # E-step: the GMM labels the encoder's pairs (c*_G), the anchors the GMM's (c*_M). The
            # known rank-1 items keep their label in both, so neither module can teach the other
            # that nothing is related.
            estep_gmm = self.gmm.log_posterior(difference).argmax(-1)
            estep_anchor = (similarity_fixed[..., None] - self.anchors).abs().argmin(-1)
            gmm_ranks = estep_gmm.masked_fill(own, 0)
            anchor_ranks = estep_anchor.masked_fill(own, 0)

        terms, count = self.rank_infonce(q @ candidates.T, gmm_ranks)
        # + 0·Σq keeps the encoder in the graph when no candidate is closer than the last rank
        # (DDP expects a gradient for every trained parameter at every step).
        encoder_loss = terms / count.clamp_min(1) + 0.0 * q.sum()
        gmm_loss = self.gmm(difference, anchor_ranks) / anchor_ranks.numel()
        # The anchors are not moved here: they follow phase 1's labels only (ranks known by
        # construction). Moving them by the GMM's c*_G, whose c*_M then trains the GMM, closed a loop
        # in which one rank took every candidate (docs/design.md, "EMMA-X").
        if self.training:
            self._enqueue(k)

        loss = encoder_loss + self.config.gmm_weight * gmm_loss
        return ObjectiveOutput(
            loss=loss,
            metrics=self._phase2_metrics(loss, encoder_loss, gmm_loss, estep_gmm, estep_anchor, ~own),
            num_tokens=batch.queries.num_tokens,
            extras={
                "encoder_loss": encoder_loss,
                "gmm_loss": gmm_loss,
                "gmm_ranks": gmm_ranks,
                "anchor_ranks": anchor_ranks,
                "estep_gmm": estep_gmm,
                "estep_anchor": estep_anchor,
                "queries": queries,
            },
        )
