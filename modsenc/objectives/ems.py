"""EMS (Mao, Chu, Kurohashi): efficient multilingual sentence embeddings from cross-lingual
token-level reconstruction (XTR) plus sentence-level contrastive learning, built for few parallel
sentences and little compute.

For a translation pair (S_l, S_l') with pooled vectors u and v:

    L = (L_XTR + L_cntrs) / |B|
    L_XTR   = Σ KL(p_{S_l'} ‖ q_{S_l}) + KL(p_{S_l} ‖ q_{S_l'})      (losses/xtr.py)
    L_cntrs = Σ_i ℓ(u_i → v) + ℓ(v_i → u)   InfoNCE on an MLP projection, T = 0.1
              (losses/projection_contrastive.py), or LaBSE's AMS on u, v (losses/additive_margin.py)

The paper's sentence vector is the mean of the token states: train EMS on a backbone whose
``pooling`` is "mean" to reproduce it; on a CLS backbone it trains the CLS vector (the one that
backbone serves). Switches for the paper's ablations: ``language_embedding``, ``xtr``,
``contrastive`` (mlp | ams | none), ``tied_embedding``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from modsenc.backbone.encoder import Backbone
from modsenc.data.readers import TranslationPair
from modsenc.objectives.base import ObjectiveOutput, TokenizedPair
from modsenc.objectives.losses.additive_margin import AdditiveMarginSoftmaxLoss
from modsenc.objectives.losses.projection_contrastive import ProjectionContrastiveLoss
from modsenc.objectives.losses.xtr import XTRHead, XTRLoss, bag_of_tokens
from modsenc.objectives.pairs import PairBatch, PairObjective, language_index, tokenize_pairs
from modsenc.utils.config import Section
from modsenc.utils.distributed import DistContext

CONTRASTIVE = ("mlp", "ams", "none")


@dataclass
class EMSConfig(Section):
    xtr: bool = True  # ablation: False drops the token-level reconstruction
    language_embedding: bool = True  # ablation: False feeds the XTR head u alone (d-dimensional)
    language_dim: int = 128  # d_la
    tied_embedding: bool = False  # ablation: W_emb is the backbone's input embedding matrix
    contrastive: str = "mlp"  # mlp (EMS) | ams (LaBSE's loss instead) | none (ablation)
    temperature: float = 0.1  # of the MLP contrastive loss
    projection_dim: int = 128
    ams_margin: float = 0.3
    ams_scale: float = 20.0
    languages: list[str] | None = None  # language table of the embedding; null = the data's languages

    def __post_init__(self) -> None:
        if self.contrastive not in CONTRASTIVE:
            raise ValueError(
                f"objective.ems.contrastive must be one of {CONTRASTIVE}, got {self.contrastive!r}"
            )
        if not self.xtr and self.contrastive == "none":
            raise ValueError("objective.ems: xtr: false with contrastive: none leaves no loss to train")
        if self.temperature <= 0:
            raise ValueError(f"objective.ems.temperature must be positive, got {self.temperature}")


class EMSObjective(PairObjective):
    name = "ems"

    def __init__(
        self, backbone: Backbone, config: EMSConfig | None = None, languages: Sequence[str] = ()
    ) -> None:
        super().__init__()
        self.config = cfg = config or EMSConfig()
        self.languages = list(cfg.languages if cfg.languages is not None else languages)
        uses_languages = cfg.xtr and cfg.language_embedding
        if uses_languages and not self.languages:
            raise ValueError(
                "EMS's language embedding needs the languages of the training pairs: set "
                "objective.ems.languages, or give data.parallel files whose header names each "
                "column's language"
            )
        vocab = backbone.word_embeddings.num_embeddings
        self.vocab_size = vocab
        self.special_ids = frozenset(backbone.tokenizer.all_special_ids)
        self.head = (
            XTRHead(
                backbone.hidden_size,
                vocab,
                num_languages=len(self.languages) if uses_languages else 0,
                language_dim=cfg.language_dim,
                tied=cfg.tied_embedding,
                init_embedding=None if cfg.tied_embedding else backbone.word_embeddings.weight,
            )
            if cfg.xtr
            else None
        )
        self.xtr_loss = XTRLoss()
        self.contrastive_loss: torch.nn.Module | None = None
        if cfg.contrastive == "mlp":
            self.contrastive_loss = ProjectionContrastiveLoss(
                backbone.hidden_size, cfg.projection_dim, cfg.temperature
            )
        elif cfg.contrastive == "ams":
            self.contrastive_loss = AdditiveMarginSoftmaxLoss(cfg.ams_margin, cfg.ams_scale)

    def config_dict(self) -> dict:
        return {**asdict(self.config), "languages": self.languages}

    # ------------------------------------------------------------------ data
    def prepare(
        self, pairs: Sequence[TranslationPair], backbone: Backbone, max_length: int
    ) -> list[TokenizedPair]:
        table = None
        if self.head is not None and self.head.language_embedding is not None:
            table = language_index(pairs, self.languages, "objective.ems.languages")
        return tokenize_pairs(pairs, backbone, max_length, table)

    # ------------------------------------------------------------------ loss
    def forward(
        self, backbone: Backbone, batch: PairBatch, dist: DistContext | None = None
    ) -> ObjectiveOutput:
        dist = dist or DistContext()
        n, total = batch.num_pairs, batch.global_pairs
        hidden = backbone(batch.clean)
        sentences = backbone.sentence_embedding(hidden, batch.clean)
        u, v = sentences[:n], sentences[n:]
        zero = torch.zeros((), device=sentences.device)

        xtr_local = zero
        if self.head is not None:
            # q of S_l predicts S_l' in language l' and vice versa: rows [u; v] get targets [p_B; p_A].
            target_language = torch.cat([batch.lang_b, batch.lang_a])
            log_q = self.head(sentences, target_language, backbone.word_embeddings.weight)
            bags = bag_of_tokens(batch.clean, self.vocab_size, self.special_ids)
            xtr_local = self.xtr_loss(log_q, torch.cat([bags[n:], bags[:n]])) / total

        contrastive_global = zero
        if self.contrastive_loss is not None:
            contrastive_global = self.contrastive_loss(
                dist.all_gather_with_grad(u), dist.all_gather_with_grad(v)
            )

        # XTR is a per-pair sum: divided by the global |B| and scaled by the world size, which DDP's
        # averaging undoes; the contrastive term is computed on the gathered global batch.
        loss = dist.world_size * xtr_local + contrastive_global
        xtr_value, contrastive_value = (
            float(x)
            for x in dist.all_reduce_sum(
                torch.stack([xtr_local.detach(), contrastive_global.detach() / dist.world_size])
            )
        )
        return ObjectiveOutput(
            loss=loss,
            metrics={
                "loss": xtr_value + contrastive_value,
                "xtr": xtr_value,
                "contrastive": contrastive_value,
            },
            num_tokens=batch.clean.num_tokens,
            extras={"u": u, "v": v},
        )
