"""Masked language modelling for a language adapter (LA): predict masked tokens of monolingual text.

The prediction head is transformers' BERT head transform (dense, activation, LayerNorm) followed
by a projection tied to the language's input embeddings, so training the head also trains the
new (FOCUS-initialised) embedding matrix. The head is thrown away after the stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertPredictionHeadTransform

from modsenc.backbone.encoder import Backbone
from modsenc.backbone.packing import PackedBatch
from modsenc.objectives.base import Objective, ObjectiveOutput
from modsenc.objectives.losses.cross_unmasking import IGNORE_INDEX
from modsenc.objectives.masking import mask_sequence
from modsenc.utils.distributed import DistContext


@dataclass
class TokenizedSentence:
    ids: list[int]

    @property
    def length(self) -> int:
        return len(self.ids)


@dataclass
class MLMConfig:
    mask_ratio: float = 0.15  # BERT's rate (MEXMA's 40% is for its cross-unmasking)

    def __post_init__(self) -> None:
        if not 0.0 < self.mask_ratio < 1.0:
            raise ValueError(f"mask_ratio must be in (0, 1), got {self.mask_ratio}")


@dataclass
class MLMBatch:
    masked: PackedBatch
    labels: torch.Tensor  # (total_tokens,), IGNORE_INDEX where nothing is predicted

    def to(self, device: torch.device | str) -> MLMBatch:
        return MLMBatch(self.masked.to(device), self.labels.to(device))


class MaskedLMHead(nn.Module):
    def __init__(self, backbone: Backbone) -> None:
        super().__init__()
        cfg = backbone.config
        transform_config = BertConfig(
            hidden_size=cfg.hidden_size,
            hidden_act=getattr(cfg, "hidden_act", "gelu"),
            layer_norm_eps=getattr(cfg, "layer_norm_eps", 1e-12),
        )
        self.transform = BertPredictionHeadTransform(transform_config)
        self.bias = nn.Parameter(torch.zeros(backbone.word_embeddings.num_embeddings))

    def forward(self, hidden: torch.Tensor, embedding_weight: torch.Tensor) -> torch.Tensor:
        return F.linear(self.transform(hidden), embedding_weight, self.bias)


class MaskedLanguageModeling(Objective):
    name = "mlm"

    def __init__(self, backbone: Backbone, config: MLMConfig | None = None, tokenizer: Any = None) -> None:
        """``tokenizer``: the one the text is tokenised with (its mask and special tokens; default
        the backbone's). A language with its own vocabulary passes its own: nothing here depends
        on which language's modules are switched in."""
        super().__init__()
        self.config = config or MLMConfig()
        self.head = MaskedLMHead(backbone)
        tokenizer = backbone.tokenizer if tokenizer is None else tokenizer
        if tokenizer.mask_token_id is None:
            raise ValueError("masked language modelling needs a tokenizer with a mask token")
        self.mask_token_id = tokenizer.mask_token_id
        self.special_ids = frozenset(tokenizer.all_special_ids)
        self.random_pool = np.array([i for i in range(len(tokenizer)) if i not in self.special_ids])

    def config_dict(self) -> dict:
        return asdict(self.config)

    def prepare_texts(
        self, texts: Sequence[str], backbone: Backbone, max_length: int
    ) -> list[TokenizedSentence]:
        return [TokenizedSentence(ids) for ids in backbone.tokenize(texts, max_length)]

    def collate(
        self,
        examples: Sequence[TokenizedSentence],
        rng: np.random.Generator,
        backbone: Backbone,
        rank: int = 0,
        world_size: int = 1,
    ) -> MLMBatch:
        masked, labels = [], []
        for ex in examples:
            ids, lab = mask_sequence(
                ex.ids, rng, self.mask_token_id, self.special_ids, self.random_pool, self.config.mask_ratio
            )
            masked.append(ids)
            labels.extend(lab)
        packed = PackedBatch.from_ids(masked, backbone.position_offset)
        return MLMBatch(packed, torch.tensor(labels, dtype=torch.long))

    def forward(self, backbone: Backbone, batch: MLMBatch, dist: DistContext) -> ObjectiveOutput:
        hidden = backbone(batch.masked)
        positions = (batch.labels != IGNORE_INDEX).nonzero(as_tuple=True)[0]
        logits = self.head(hidden.index_select(0, positions), backbone.word_embeddings.weight)
        targets = batch.labels.index_select(0, positions)
        loss = F.cross_entropy(logits.float(), targets)
        with torch.no_grad():
            accuracy = (logits.argmax(-1) == targets).float().mean()
        return ObjectiveOutput(
            loss=loss,
            metrics={"loss": loss.item(), "mlm_accuracy": float(accuracy)},
            num_tokens=batch.masked.num_tokens,
        )
