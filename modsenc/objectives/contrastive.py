"""The LaBSE-style dual-encoder baseline: bidirectional in-batch softmax with additive margin
(m = 0.3) and scale on the pooled sentence vectors of translation pairs, negatives gathered from
every process (losses/additive_margin.py, sentence-transformers' MNRL underneath)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from modsenc.backbone.encoder import Backbone
from modsenc.objectives.base import ObjectiveOutput
from modsenc.objectives.losses.additive_margin import AdditiveMarginSoftmaxLoss
from modsenc.objectives.pairs import PairBatch, PairObjective
from modsenc.utils.config import Section
from modsenc.utils.distributed import DistContext


@dataclass
class ContrastiveConfig(Section):
    margin: float = 0.3
    scale: float = 20.0  # sentence-transformers' default, i.e. temperature 0.05


class ContrastiveObjective(PairObjective):
    name = "contrastive"

    def __init__(self, backbone: Backbone, config: ContrastiveConfig | None = None) -> None:
        super().__init__()
        self.config = config or ContrastiveConfig()
        self.loss = AdditiveMarginSoftmaxLoss(self.config.margin, self.config.scale)

    def config_dict(self) -> dict:
        return asdict(self.config)

    def forward(
        self, backbone: Backbone, batch: PairBatch, dist: DistContext | None = None
    ) -> ObjectiveOutput:
        dist = dist or DistContext()
        n = batch.num_pairs
        sentences = backbone.sentence_embedding(backbone(batch.clean), batch.clean)
        x, y = sentences[:n], sentences[n:]
        # Every process computes the same global loss; see utils/distributed.py.
        loss = self.loss(dist.all_gather_with_grad(x), dist.all_gather_with_grad(y))
        value = float(dist.all_reduce_sum(loss.detach() / dist.world_size))
        return ObjectiveOutput(
            loss=loss,
            metrics={"loss": value, "ams": value},
            num_tokens=batch.clean.num_tokens,
            extras={"x": x, "y": y},
        )
