"""The ``se`` stage: LANG's sentence-encoding adapter, stacked (additively) on the LA, trained
with MNRL on paraphrase pairs (LANG's own, and ``se.transfer_languages``' pairs)."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from modsenc.modules.kinds.se.config import SEConfig, sentence_adapter_config
from modsenc.modules.kinds.stage import Metrics, Plan, StageContext, StageRecipe
from modsenc.objectives.sentence_pairs import SentencePairExample, SentencePairObjective

log = logging.getLogger(__name__)


def transfer_paraphrases(ctx: StageContext, languages: list[str]) -> list:
    """Other languages' paraphrase pairs the SE stage adds to LANG's own (``se.transfer_languages``)."""
    if not languages:
        return []
    wanted = None if "*" in languages else set(languages)
    pairs = [p for p in ctx.data.other_paraphrases if wanted is None or p.lang in wanted]
    counts = Counter(p.lang for p in pairs)
    log.info("[%s] se: adding other languages' pairs %s", ctx.lang, dict(sorted(counts.items())))
    return pairs


def train_se(ctx: StageContext, out: Path, run_dir: Path) -> Metrics:
    cfg = ctx.settings("se")
    ctx.modular.add_lora(ctx.lang, "se", sentence_adapter_config(cfg.r, cfg.alpha, cfg.dropout))
    ctx.modular.select(ctx.lang, ctx.modular.modules_of(ctx.lang))
    ctx.modular.set_trainable(ctx.lang, ["se"])

    def examples_of(pairs: list) -> list[SentencePairExample]:
        positives, negatives = [p.positive for p in pairs], [p.negative for p in pairs]
        return ctx.pair_examples("paraphrase", positives, negatives, [p.anchor for p in pairs])

    examples = examples_of(ctx.data.paraphrases + transfer_paraphrases(ctx, cfg.transfer_languages))
    dev = examples_of(ctx.data.dev_paraphrases) if cfg.eval_every else []
    objective = SentencePairObjective(scale=cfg.scale)
    sampler = ctx.sampler(examples, cfg.batch_size)
    metrics = ctx.fit(objective, examples, sampler, cfg, run_dir, dev)
    ctx.modular.save_module(ctx.lang, "se", out)
    return metrics


def _plan(ctx: StageContext) -> Plan:
    data, wanted = ctx.data, ctx.settings("se").transfer_languages or []
    others = [p for p in data.other_paraphrases if wanted and ("*" in wanted or p.lang in wanted)]
    return Plan(len(data.paraphrases) + len(others), "paraphrase pairs")


STAGE = StageRecipe(
    SEConfig,
    train_se,
    prepare=lambda ctx: ctx.needs("se", "paraphrase", ctx.data.paraphrases),
    evaluate_after=True,
    plan=_plan,
)
