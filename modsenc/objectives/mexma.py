"""MEXMA (Janeiro et al., 2024): cross-lingual sentence encoders from token-level cross-unmasking
plus sentence-level alignment and KoLeo.

For a translation pair (A, B), four encoder passes share weights: clean A, clean B, masked A and
masked B. The sentence vectors S_A and S_B are the clean passes' pooled last layer (the backbone's
pooling: CLS as in the paper, or the mean for a mean-pooled model such as e5). The head must
rebuild masked A from A's token states with S_B in position 0, and masked B with S_A, so each
sentence vector has to carry its sentence's content in a language-agnostic way.

    loss = alpha * MSE(S_A, S_B) + beta * (CE_A + CE_B) + gamma * (KoLeo(S_A) + KoLeo(S_B))
           + anchor_weight * MSE(S_A, T_A) + anchor_translation_weight * MSE(S_B, T_B)

with the paper's alpha=1, beta=1/2, gamma=0.01/2 (appendix A), the halves averaging the two
symmetric terms. The last term is not the paper's: it is the adaptation for a start that is
already a good sentence encoder (e5), off by default. T_A is the pivot sentence's vector under the
starting backbone, computed once before training, so the pivot cannot drift while alignment pulls
the other languages onto it: with S_A held near T_A, alpha * MSE(S_A, S_B) becomes the
multilingual distillation of Reimers & Gurevych (2020), student(B) -> teacher(A). T_B, the
translation's own starting vector, is the same guard for the other side: it trades how far B
moves onto A's vector for how much of the start's own space for B's language is kept.

The four passes run as two packed forwards (clean A+B, masked A+B): sequences
never attend to each other, so this is the same computation with fewer kernel launches.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from modsenc.backbone.encoder import Backbone
from modsenc.backbone.packing import PackedBatch
from modsenc.data.batching import shard
from modsenc.data.readers import TranslationPair
from modsenc.objectives.base import Objective, ObjectiveOutput, TokenizedPair
from modsenc.objectives.losses.cross_unmasking import CrossUnmaskingHead
from modsenc.objectives.losses.infonce_alignment import InfoNCEAlignmentLoss
from modsenc.objectives.losses.koleo import KoLeoLoss
from modsenc.objectives.losses.mse_alignment import MSEAlignmentLoss
from modsenc.objectives.masking import mask_sequence
from modsenc.utils.config import Section
from modsenc.utils.distributed import DistContext


@dataclass
class MEXMAConfig(Section):
    alpha: float = 1.0  # alignment weight
    beta: float = 0.5  # cross-unmasking weight (on CE_A + CE_B)
    gamma: float = 0.005  # KoLeo weight (on KoLeo_A + KoLeo_B)
    mask_ratio: float = 0.4
    head_layers: int = 6
    head_heads: int = 8
    head_intermediate_size: int | None = None  # default 4 * hidden, XLM-R's ratio
    head_dropout: float = 0.1
    token_gradients: bool = True  # ablation: False = unmasking reaches the encoder only via S_A/S_B
    koleo: bool = True  # ablation: False drops the KoLeo term
    alignment: str = "mse"  # "mse" (MEXMA) or "infonce" (contrastive ablation)
    infonce_temperature: float = 0.05
    # "full": the unmasking softmax runs over the whole vocabulary; "corpus": over the pieces the
    # training pairs use (every label is one), which makes a 250K vocabulary affordable on a CPU.
    output_vocabulary: str = "full"
    # For a pretrained start: weight of MSE(S_A, the starting backbone's vector of A), A the pivot
    # side. 0 is the paper's MEXMA. The targets are computed in prepare(), before any step.
    anchor_weight: float = 0.0
    anchor_translation_weight: float = 0.0  # the same for S_B and B's starting vector

    def __post_init__(self) -> None:
        for key in ("anchor_weight", "anchor_translation_weight"):
            if getattr(self, key) < 0:
                raise ValueError(f"objective.{key} must be >= 0, got {getattr(self, key)}")
        if self.output_vocabulary not in ("full", "corpus"):
            raise ValueError(
                f"objective.output_vocabulary must be 'full' or 'corpus', got {self.output_vocabulary!r}"
            )
        if self.alignment not in ("mse", "infonce"):
            raise ValueError(f"objective.alignment must be 'mse' or 'infonce', got {self.alignment!r}")
        if not 0.0 < self.mask_ratio < 1.0:
            raise ValueError(f"objective.mask_ratio must be in (0, 1), got {self.mask_ratio}")


@dataclass
class MEXMABatch:
    clean: PackedBatch  # A sentences then B sentences
    masked: PackedBatch  # same layout, masked ids
    labels: torch.Tensor  # (total_tokens,) original ids at masked positions, IGNORE_INDEX elsewhere
    num_pairs: int
    # (num_pairs,) rows of the objective's anchor targets for S_A and for S_B (None: not anchored)
    anchor_rows: torch.Tensor | None = None
    anchor_rows_b: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> MEXMABatch:
        rows, rows_b = (None if r is None else r.to(device) for r in (self.anchor_rows, self.anchor_rows_b))
        return MEXMABatch(
            self.clean.to(device),
            self.masked.to(device),
            self.labels.to(device),
            self.num_pairs,
            rows,
            rows_b,
        )


@dataclass
class AnchoredPair(TokenizedPair):
    """A pair whose sides have rows in the objective's anchor targets (-1: that side is not anchored)."""

    anchor_row: int = -1
    anchor_row_b: int = -1


class MEXMAObjective(Objective):
    name = "mexma"

    def __init__(self, backbone: Backbone, config: MEXMAConfig | None = None) -> None:
        super().__init__()
        self.config = config or MEXMAConfig()
        self.head = CrossUnmaskingHead(
            hidden_size=backbone.hidden_size,
            vocab_size=backbone.word_embeddings.num_embeddings,
            num_layers=self.config.head_layers,
            num_heads=self.config.head_heads,
            intermediate_size=self.config.head_intermediate_size,
            hidden_dropout=self.config.head_dropout,
        )
        self.mse = MSEAlignmentLoss()
        self.infonce = InfoNCEAlignmentLoss(self.config.infonce_temperature)
        self.koleo = KoLeoLoss()
        tokenizer = backbone.tokenizer
        self.mask_token_id = tokenizer.mask_token_id
        if self.mask_token_id is None:
            raise ValueError("MEXMA needs a tokenizer with a mask token")
        self.special_ids = frozenset(tokenizer.all_special_ids)
        vocab = backbone.word_embeddings.num_embeddings
        self.random_pool = np.array(
            [i for i in range(min(vocab, len(tokenizer))) if i not in self.special_ids]
        )

        # The restricted softmax's vocabulary, set by prepare(); a buffer so it follows .to(device).
        self.register_buffer("output_ids", None, persistent=False)
        # The starting backbone's vectors of the distinct sentences of each anchored side, set by
        # prepare() on the head's device. Not saved in checkpoints: a resumed run recomputes them
        # from the same start. Not a buffer either: DDP would broadcast every buffer each step, and
        # every process computes the same targets itself.
        self.anchor_targets: torch.Tensor | None = None

    def config_dict(self) -> dict:
        return asdict(self.config)

    def prepare(
        self, pairs: Sequence[TranslationPair], backbone: Backbone, max_length: int
    ) -> list[TokenizedPair]:
        examples = super().prepare(pairs, backbone, max_length)
        if self.config.output_vocabulary == "corpus":
            used = {t for ex in examples for t in (*ex.ids_a, *ex.ids_b)} - self.special_ids
            device = self.head.bias.device
            self.output_ids = torch.tensor(sorted(used), dtype=torch.long, device=device)
        if self.anchored:
            examples = self._anchor(pairs, examples, backbone, max_length)
        return examples

    @property
    def anchored(self) -> bool:
        return self.config.anchor_weight > 0 or self.config.anchor_translation_weight > 0

    def _anchor(
        self,
        pairs: Sequence[TranslationPair],
        examples: list[TokenizedPair],
        backbone: Backbone,
        max_length: int,
    ) -> list[TokenizedPair]:
        """The anchor targets: each distinct sentence of an anchored side encoded once by
        ``backbone`` as it is now (prepare runs before training and before a resume loads its
        checkpoint), in fp32 with dropout off, tokenised exactly as the training passes see it."""
        rows: dict[str, int] = {}
        sides = (self.config.anchor_weight > 0, self.config.anchor_translation_weight > 0)
        for pair in pairs:
            for text, anchored in zip((pair.text_a, pair.text_b), sides):
                if anchored:
                    rows.setdefault(text, len(rows))
        texts = list(rows)
        targets = backbone.encode(
            texts,
            batch_size=64,
            precision="fp32",
            convert_to_tensor=True,
            tokenize=lambda batch: backbone.tokenize(batch, max_length),
        )
        self.anchor_targets = targets.to(self.head.bias.device)
        return [
            AnchoredPair(
                ex.ids_a,
                ex.ids_b,
                anchor_row=rows[pair.text_a] if sides[0] else -1,
                anchor_row_b=rows[pair.text_b] if sides[1] else -1,
            )
            for ex, pair in zip(examples, pairs)
        ]

    # ------------------------------------------------------------------ data
    def collate(
        self,
        examples: Sequence[TokenizedPair],
        rng: np.random.Generator,
        backbone: Backbone,
        rank: int = 0,
        world_size: int = 1,
    ) -> MEXMABatch:
        masked_a, labels_a, masked_b, labels_b = [], [], [], []
        for ex in examples:  # masks drawn for the whole global batch, in order
            m, lab = mask_sequence(
                ex.ids_a, rng, self.mask_token_id, self.special_ids, self.random_pool, self.config.mask_ratio
            )
            masked_a.append(m)
            labels_a.append(lab)
            m, lab = mask_sequence(
                ex.ids_b, rng, self.mask_token_id, self.special_ids, self.random_pool, self.config.mask_ratio
            )
            masked_b.append(m)
            labels_b.append(lab)
        mine = shard(list(range(len(examples))), rank, world_size)
        clean = [examples[i].ids_a for i in mine] + [examples[i].ids_b for i in mine]
        masked = [masked_a[i] for i in mine] + [masked_b[i] for i in mine]
        labels = [t for i in mine for t in labels_a[i]] + [t for i in mine for t in labels_b[i]]
        clean_packed = PackedBatch.from_ids(clean, backbone.position_offset)
        anchor_rows = anchor_rows_b = None
        if self.anchored:
            if not all(isinstance(ex, AnchoredPair) for ex in examples):
                raise RuntimeError(
                    "objective.anchor_*weight > 0 needs the examples of this objective's prepare()"
                )
            if self.config.anchor_weight > 0:
                anchor_rows = torch.tensor([examples[i].anchor_row for i in mine], dtype=torch.long)
            if self.config.anchor_translation_weight > 0:
                anchor_rows_b = torch.tensor([examples[i].anchor_row_b for i in mine], dtype=torch.long)
        return MEXMABatch(
            clean=clean_packed,
            masked=clean_packed.with_input_ids(
                torch.tensor([t for s in masked for t in s], dtype=torch.long)
            ),
            labels=torch.tensor(labels, dtype=torch.long),
            num_pairs=len(mine),
            anchor_rows=anchor_rows,
            anchor_rows_b=anchor_rows_b,
        )

    # ------------------------------------------------------------------ loss
    def forward(
        self, backbone: Backbone, batch: MEXMABatch, dist: DistContext | None = None
    ) -> ObjectiveOutput:
        dist = dist or DistContext()
        cfg = self.config
        n = batch.num_pairs
        hidden_clean = backbone(batch.clean)
        sentences = backbone.sentence_embedding(hidden_clean, batch.clean)
        s_a, s_b = sentences[:n], sentences[n:]
        hidden_masked, mlm_local, sq_sum, counts = self._cross_unmasking(backbone, batch, s_a, s_b, dist)
        anchors = self._anchor_terms(s_a, s_b, batch, counts[2])
        loss, logged = self._combined_loss(s_a, s_b, mlm_local, sq_sum, counts, dist, anchors)
        align, mlm, koleo = logged["align"], logged["mlm"], logged["koleo"]
        total = cfg.alpha * align + cfg.beta * mlm + (cfg.gamma * koleo if cfg.koleo else 0.0)
        metrics = {"loss": total + sum(weight * logged[name] for name, (weight, _) in anchors.items())}
        metrics |= logged
        return ObjectiveOutput(
            loss=loss,
            metrics=metrics,
            num_tokens=batch.clean.num_tokens,
            extras={"hidden_clean": hidden_clean, "hidden_masked": hidden_masked, "s_a": s_a, "s_b": s_b},
        )

    def _cross_unmasking(
        self, backbone: Backbone, batch: MEXMABatch, s_a: torch.Tensor, s_b: torch.Tensor, dist: DistContext
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each side's masked tokens predicted from its own masked text and the other side's
        sentence vector: (the masked pass's hidden states, this process's share of CE_A + CE_B,
        the alignment's local squared-error sum, the global counts [masked A, masked B, alignment
        elements])."""
        n = batch.num_pairs
        grad_mode = contextlib.nullcontext() if self.config.token_gradients else torch.no_grad()
        with grad_mode:
            hidden_masked = backbone(batch.masked)
        # Masked A is rebuilt with S_B in position 0, masked B with S_A.
        token_losses, positions = self.head(
            hidden_masked,
            torch.cat([s_b, s_a]),
            batch.masked,
            batch.labels,
            backbone.word_embeddings.weight,
            backbone.attention,
            self.output_ids,
        )
        a_tokens = sum(batch.clean.seqlens[:n])  # host-side: no device sync
        from_a = positions < a_tokens
        sums = torch.stack([token_losses[from_a].sum(), token_losses[~from_a].sum()])
        sq_sum, numel = self.mse(s_a, s_b)
        # One all-reduce for every global count: masked tokens of A, of B, and alignment elements.
        counts = dist.all_reduce_sum(
            torch.stack([from_a.sum(), (~from_a).sum(), torch.tensor(numel, device=from_a.device)]).float()
        )
        # clamp: a side whose sentences are all special tokens has nothing masked (and sums to 0).
        mlm_local = (sums / counts[:2].clamp_min(1)).sum()  # this process's share of CE_A + CE_B
        return hidden_masked, mlm_local, sq_sum, counts

    def _anchor_terms(
        self, s_a: torch.Tensor, s_b: torch.Tensor, batch: MEXMABatch, elements: torch.Tensor
    ) -> dict[str, tuple[float, torch.Tensor]]:
        """Each anchored side's (weight, this process's share of MSE(S, T)), by metric name.
        ``elements``: the global count of alignment elements, which each side's anchor shares."""
        terms = {}
        for name, weight, vectors, rows in (
            ("anchor", self.config.anchor_weight, s_a, batch.anchor_rows),
            ("anchor_translation", self.config.anchor_translation_weight, s_b, batch.anchor_rows_b),
        ):
            if weight > 0:
                if rows is None or self.anchor_targets is None:
                    raise RuntimeError(
                        "objective.anchor_*weight > 0 needs prepare() and collate() of this objective"
                    )
                sq_sum, _ = self.mse(vectors, self.anchor_targets[rows])
                terms[name] = (weight, sq_sum / elements)
        return terms

    def _combined_loss(
        self,
        s_a: torch.Tensor,
        s_b: torch.Tensor,
        mlm_local: torch.Tensor,
        sq_sum: torch.Tensor,
        counts: torch.Tensor,
        dist: DistContext,
        anchors: dict[str, tuple[float, torch.Tensor]],
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """alpha * alignment + beta * MLM + gamma * KoLeo + the anchors' weighted terms as this
        process's loss (the local terms scaled by world_size, as DDP averages gradients over
        processes; the terms over gathered vectors not), and the values of align, mlm, koleo and
        each anchor summed over processes, in one all-reduce."""
        cfg = self.config
        local_terms = cfg.beta * mlm_local
        for weight, anchor_local in anchors.values():
            local_terms = local_terms + weight * anchor_local
        global_terms = torch.zeros((), device=s_a.device)
        needs_gather = cfg.alignment == "infonce" or cfg.koleo
        all_a = dist.all_gather_with_grad(s_a) if needs_gather else s_a
        all_b = dist.all_gather_with_grad(s_b) if needs_gather else s_b
        if cfg.alignment == "mse":
            align_local = sq_sum / counts[2]
            local_terms = local_terms + cfg.alpha * align_local
            align_value = align_local
        else:
            align_global = self.infonce(all_a, all_b)
            global_terms = global_terms + cfg.alpha * align_global
            align_value = align_global / dist.world_size  # summed over processes when logged
        koleo_value = torch.zeros((), device=s_a.device)
        if cfg.koleo:
            koleo_global = self.koleo(all_a) + self.koleo(all_b)
            global_terms = global_terms + cfg.gamma * koleo_global
            koleo_value = koleo_global / dist.world_size

        loss = dist.world_size * local_terms + global_terms
        values = [align_value, mlm_local, koleo_value, *(local for _, local in anchors.values())]
        logged = dist.all_reduce_sum(torch.stack([v.detach() for v in values]))
        names = ["align", "mlm", "koleo", *anchors]
        return loss, {name: float(x) for name, x in zip(names, logged)}
