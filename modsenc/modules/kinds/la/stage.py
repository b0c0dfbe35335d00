"""The ``la`` stage: LANG's language adapter (and its vocabulary's embeddings, when it has one)
trained by masked language modelling on LANG's monolingual text."""

from __future__ import annotations

from pathlib import Path

from modsenc.data.batching import LengthBucketBatchSampler
from modsenc.modules.kinds.la.config import LAConfig, language_adapter_config
from modsenc.modules.kinds.stage import Metrics, Plan, StageContext, StageRecipe
from modsenc.objectives.mlm import MaskedLanguageModeling, MLMConfig, TokenizedSentence


def train_la(ctx: StageContext, out: Path, run_dir: Path) -> Metrics:
    cfg, modular = ctx.settings("la"), ctx.modular
    modular.add_lora(ctx.lang, "la", language_adapter_config(cfg.r, cfg.alpha, cfg.dropout))
    kinds = {"la"} | ({"vocab"} & modular.modules_of(ctx.lang))  # the LA trains the embeddings too
    modular.select(ctx.lang, kinds)
    modular.set_trainable(ctx.lang, sorted(kinds))
    tokenizer = modular.tokenizer_of(ctx.lang, kinds)  # LANG's own when it has a vocab module
    objective = MaskedLanguageModeling(modular.backbone, MLMConfig(mask_ratio=cfg.mask_ratio), tokenizer)
    examples = [TokenizedSentence(ids) for ids in ctx.tokenize(ctx.data.mono, kinds)]
    sampler = LengthBucketBatchSampler([e.length for e in examples], cfg.batch_size, seed=ctx.seed)
    metrics = ctx.fit(objective, examples, sampler, cfg, run_dir)
    for kind in sorted(kinds):  # la, and the embeddings it trained
        modular.save_module(ctx.lang, kind, out)
    return metrics


STAGE = StageRecipe(
    LAConfig,
    train_la,
    prepare=lambda ctx: ctx.needs("la", "mono", ctx.data.mono),
    plan=lambda ctx: Plan(len(ctx.data.mono), "sentences", drop_last=False),
)
