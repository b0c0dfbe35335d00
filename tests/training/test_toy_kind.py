"""A trained module kind added from this file alone (docs/design.md, "Adding a trained module
kind"): its module, settings and stage, one ``register_kind`` call; add-language trains it, the
bundle on disk holds it and it loads back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import torch

from modsenc.backbone import Backbone
from modsenc.modules.bundle import Zoo
from modsenc.modules.kinds import MODULE_KINDS, register_kind, unregister_kind
from modsenc.modules.kinds.lora import LoraKind
from modsenc.modules.kinds.stage import LoRASettings, Metrics, Plan, Schedule, StageContext, StageRecipe
from modsenc.modules.manifest import BundleManifest
from modsenc.modules.modular import ModularBackbone
from modsenc.objectives.sentence_pairs import SentencePairObjective
from modsenc.training.add_language import run
from tests._zoo import HELD_OUT, fast_recipe


# ------------------------------------------------------------------------------------ the toy kind
@dataclass
class ToyConfig(Schedule, LoRASettings):
    """Its recipe section: a rank-2 LoRA on the query projections, two steps."""

    r: int = 2
    alpha: int = 4
    max_steps: int | None = 2
    batch_size: int = 8


def train_toy(ctx: StageContext, out: Path, run_dir: Path) -> Metrics:
    from peft import LoraConfig  # noqa: PLC0415

    cfg = ctx.settings("toy")
    config = LoraConfig(r=cfg.r, lora_alpha=cfg.alpha, lora_dropout=0.0, target_modules=["query"])
    ctx.modular.add_module(ctx.lang, "toy", config)
    ctx.modular.select(ctx.lang, ctx.modular.modules_of(ctx.lang))
    ctx.modular.set_trainable(ctx.lang, ["toy"])
    pairs = ctx.data.paraphrases
    examples = ctx.pair_examples(
        "paraphrase", [p.positive for p in pairs], [None] * len(pairs), [p.anchor for p in pairs]
    )
    metrics = ctx.fit(
        SentencePairObjective(scale=20.0), examples, ctx.sampler(examples, cfg.batch_size), cfg, run_dir
    )
    ctx.modular.save_module(ctx.lang, "toy", out)
    return metrics


TOY_STAGE = StageRecipe(
    ToyConfig,
    train_toy,
    prepare=lambda ctx: ctx.needs("toy", "paraphrase", ctx.data.paraphrases),
    plan=lambda ctx: Plan(len(ctx.data.paraphrases), "paraphrase pairs"),
)


class ToyKind(LoraKind):
    """A peft LoRA saved as ``toy/``, switched with the LA and SE (peft adds their deltas)."""

    name: ClassVar[str] = "toy"
    files: ClassVar[tuple[str, ...]] = ("toy",)

    def stage(self) -> StageRecipe:
        return TOY_STAGE


@pytest.fixture()
def toy_kind():
    register_kind(ToyKind())
    try:
        yield
    finally:
        unregister_kind("toy")
    assert "toy" not in MODULE_KINDS


# ------------------------------------------------------------------------------------ the test
def test_a_toy_kind_trains_through_add_language_and_loads_back(
    toy_kind, tiny_backbone_dir, tmp_path, caplog
) -> None:
    zoo_dir = tmp_path / "zoo"
    with caplog.at_level("INFO", logger="modsenc.training.add_language"):
        bundle = run(
            "en",
            fast_recipe(),
            zoo_dir,
            backbone_dir=tiny_backbone_dir,
            work_dir=tmp_path / "w-en",
            stages=["toy"],
        )
    assert any("toy: " in r.getMessage() and "paraphrase pairs" in r.getMessage() for r in caplog.records)

    # on disk: the bundle holds the toy module, listed in its manifest with its stage
    assert (bundle / "toy" / "adapter_model.safetensors").is_file()
    manifest = BundleManifest.read(bundle, "en")
    assert manifest.stages == ["toy"] and set(manifest.modules) == {"toy"}
    assert manifest.modules["toy"]["path"] == "toy" and manifest.modules["toy"]["parameters"] > 0
    assert manifest.stage_metrics["toy"]

    # loaded back (its files checked against the manifest): the toy LoRA changes the vectors
    zoo = Zoo(zoo_dir)
    modular = ModularBackbone(Backbone.from_pretrained(zoo.backbone_dir, attention="sdpa")).eval()
    assert modular.load_bundle(zoo.bundle_dir("en"), "en") == {"toy"}
    texts = HELD_OUT["en"]
    with_toy = modular.encode(texts, "en", ["toy"], convert_to_tensor=True)
    bare = modular.encode(texts, None, convert_to_tensor=True)
    assert torch.isfinite(with_toy).all() and not torch.equal(with_toy, bare)
