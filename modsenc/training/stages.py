"""add-language's stage recipes: how each module kind is trained, looked up by the kind's name.

A stage is named after the module kind it trains (``modsenc.modules.kinds``: the registry gives
the stages and their order); ``STAGE_RECIPES`` gives, per kind, what the stage checks and loads
before any output is touched (``prepare``), how it trains and saves its module (``train``), what
beyond the recipe and data enters its cache key (``key_parts``), whether dev metrics are taken
after it (``evaluate_after``) and what it records in the bundle manifest (``manifest_fields``).

    vocab  a SentencePiece tokenizer for LANG + FOCUS-initialised embeddings (deepfocus)
    la     language adapter: LoRA on q/k/v + the embeddings, masked language modelling
    se     sentence-encoding adapter: LoRA on all linears, stacked (additively) on the LA, MNRL
    cla    cross-lingual alignment: a parallel bottleneck adapter (adapters' ParBnConfig) that maps
           LANG onto the frozen pivot's embeddings (paraphrase MNRL, parallel cosine, or both)
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from modsenc.backbone.focus import focus_from_texts
from modsenc.backbone.tokenizer import train_sentencepiece
from modsenc.data.batching import AlternatingBatchSampler, LengthBucketBatchSampler
from modsenc.data.language_data import load_language_data
from modsenc.modules.bundle import TOKENIZER_DIR, check_language_code
from modsenc.modules.configs import alignment_adapter_config, language_adapter_config, sentence_adapter_config
from modsenc.modules.kinds import monolingual
from modsenc.objectives.losses.distillation import distillation_targets
from modsenc.objectives.mlm import MaskedLanguageModeling, MLMConfig, TokenizedSentence
from modsenc.objectives.sentence_pairs import SentencePairExample, SentencePairObjective
from modsenc.training.context import StageContext
from modsenc.utils.errors import InputError

log = logging.getLogger(__name__)

Metrics = dict[str, float]


def _nothing(ctx: StageContext) -> Any:
    return []


@dataclass(frozen=True)
class StageRecipe:
    """How add-language trains one module kind (the stage of the same name)."""

    train: Callable[[StageContext, Path, Path], Metrics]
    """(context, module folder, checkpoint folder) -> metrics: create the module, train it, save it."""
    prepare: Callable[[StageContext], Any]
    """Check the data it needs and load what it takes beyond LANG's own, before any output (and
    before the backbone: the context's ``modular`` is None); what it returns is the context's
    ``prepared[STAGE]`` in the other hooks."""
    key_parts: Callable[[StageContext], list[Any]] = _nothing
    """What its cache key hashes beyond the recipe, the data and the stages before it."""
    evaluate_after: bool = False
    """Dev metrics after it even when it is not the last stage."""
    manifest_fields: Callable[[StageContext], dict[str, Any]] = lambda ctx: {}
    """``BundleManifest`` fields it fills in."""


# ------------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Transfer:
    """What the cla stage's ``prepare`` loads: other languages' (pivot, translation) pairs
    (``cla.transfer_languages``) and their file records by language (for its cache key)."""

    parallel: list[tuple[str, str]]
    files: dict[str, list[dict[str, Any]]]


def _prepare_cla(ctx: StageContext) -> Transfer:
    variant = ctx.config.cla.variant  # one of CLA_VARIANTS (checked by CLAConfig)
    if variant in ("pp", "jt") and not ctx.data.crosslingual:
        raise InputError(
            f"cla variant {variant} needs {ctx.pivot}-{ctx.lang} paraphrase pairs (rows of both "
            f"languages sharing a pair_id) and {ctx.searched('paraphrase')}{ctx.no_data_at_all()}: "
            "pass --paraphrase FILE, --data DIR (a data folder whose files have them), --set "
            "cla.variant=pl with parallel data, or make them with `modsenc synthesize`"
        )
    if variant in ("pl", "jt") and not ctx.data.parallel:
        raise InputError(
            f"cla variant {variant} needs {ctx.pivot}-{ctx.lang} parallel pairs and "
            f"{ctx.searched('parallel')}{ctx.no_data_at_all()}: pass --parallel FILE (a TSV with "
            f"{ctx.pivot} and {ctx.lang} columns), --data DIR (a data folder whose files have "
            f"them), or translate {ctx.pivot} text with `modsenc synthesize`"
        )
    # Other languages' parallel pairs (cla.transfer_languages), and their file records, which
    # enter the CLA's cache key only.
    return Transfer(*transfer_parallel(ctx, ctx.config.cla.transfer_languages))


def transfer_paraphrases(ctx: StageContext, languages: list[str]) -> list:
    """Other languages' paraphrase pairs the SE stage adds to LANG's own (``se.transfer_languages``)."""
    if not languages:
        return []
    wanted = None if "*" in languages else set(languages)
    pairs = [p for p in ctx.data.other_paraphrases if wanted is None or p.lang in wanted]
    counts = Counter(p.lang for p in pairs)
    log.info("[%s] se: adding other languages' pairs %s", ctx.lang, dict(sorted(counts.items())))
    return pairs


def transfer_parallel(
    ctx: StageContext, languages: list[str]
) -> tuple[list[tuple[str, str]], dict[str, list[dict[str, Any]]]]:
    """Other languages' (pivot, translation) pairs the CLA stage adds to LANG's own
    (``cla.transfer_languages``: codes, or "*" for every language in ``data.per_language``),
    and their file records by language. LANG and the pivot are skipped; so is any pair whose
    pivot sentence LANG holds out for dev, since multi-parallel files translate the same
    sentence into every language."""
    if not languages:
        return [], {}
    names = sorted(ctx.config.data.per_language) if "*" in languages else languages
    held = {a for a, _ in ctx.data.dev_parallel} | {a for a, _ in ctx.data.dev_crosslingual}
    pairs: list[tuple[str, str]] = []
    files: dict[str, list[dict[str, Any]]] = {}
    counts: dict[str, int] = {}
    for other in (check_language_code(n) for n in names):
        if other in (ctx.lang, ctx.pivot):
            continue
        try:
            data = load_language_data(other, ctx.pivot, ctx.config.data, ctx.recipe_path, ctx.data_dir)
        except ValueError as err:  # e.g. a shared parallel file without this language's column
            raise ValueError(f"cla.transfer_languages: {other}'s data: {err}") from err
        if not data.parallel and "*" not in languages:
            raise ValueError(
                f"cla.transfer_languages names {other}, which has no parallel data with "
                f"{ctx.pivot}: add files under data.per_language.{other}.parallel or remove it"
            )
        kept = [p for p in data.parallel if p[0] not in held]
        pairs.extend(kept)
        files[other], counts[other] = data.files["parallel"], len(kept)
    log.info("[%s] cla: adding other languages' parallel pairs %s", ctx.lang, counts)
    return pairs, files


# ----------------------------------------------------------------------------------------- training
def train_vocab(ctx: StageContext, out: Path, run_dir: Path) -> Metrics:
    cfg = ctx.config.vocab
    tokenizer = train_sentencepiece(ctx.data.mono, out / TOKENIZER_DIR, vocab_size=cfg.vocab_size)
    weight = focus_from_texts(
        ctx.modular.base_tokenizer,
        ctx.modular.base_embeddings.weight,
        tokenizer,
        ctx.data.mono,
        ctx.work / "vocab" / "focus",
        fasttext=cfg,
        seed=ctx.seed,
    )
    ctx.modular.add_vocabulary(ctx.lang, tokenizer, weight)
    ctx.modular.save_module(ctx.lang, "vocab", out)
    return {"vocab_size": float(len(tokenizer))}


def train_la(ctx: StageContext, out: Path, run_dir: Path) -> Metrics:
    cfg, modular = ctx.config.la, ctx.modular
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


def train_se(ctx: StageContext, out: Path, run_dir: Path) -> Metrics:
    cfg = ctx.config.se
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


def cla_examples(
    ctx: StageContext, crosslingual: list[tuple[str, str, str | None]], parallel: list[tuple[str, str]]
) -> tuple[list[SentencePairExample], list[SentencePairExample]]:
    """(cross-lingual paraphrase examples, parallel examples): LANG's side as text, the pivot's
    as fixed vectors computed once through the pivot's own modules (its side is frozen)."""
    cfg = ctx.config.cla

    def encode_pivot(texts: list[str]) -> Any:
        return ctx.encode(ctx.pivot, ctx.pivot_kinds, texts)

    paraphrase: list[SentencePairExample] = []
    translations: list[SentencePairExample] = []
    if crosslingual:
        targets = list(torch.as_tensor(encode_pivot([a for a, _, _ in crosslingual])))
        texts, negatives = [b for _, b, _ in crosslingual], [n for _, _, n in crosslingual]
        paraphrase = ctx.pair_examples("paraphrase", texts, negatives, targets)
    if parallel:
        vectors = torch.as_tensor(encode_pivot([a for a, _ in parallel]))
        kind, targets = "parallel", None
        texts = [b for _, b in parallel]
        structure = None
        if cfg.parallel_loss == "distill":
            kind = "distill"
            own, without_cla = None, None
            before_cla = monolingual(ctx.modular.modules_of(ctx.lang))
            from_modules = cfg.structure_weight > 0 and cfg.structure_source == "modules"
            if from_modules or (cfg.own_weight > 0 and cfg.own_source == "modules"):  # the SE's vectors
                without_cla = torch.as_tensor(ctx.encode(ctx.lang, before_cla, texts))
            if cfg.own_weight > 0:  # the vector of the sentence itself: bare, or through the SE
                bare = cfg.own_source == "backbone"
                own = torch.as_tensor(ctx.encode(ctx.lang, set(), texts)) if bare else without_cla
            targets = list(distillation_targets(vectors, own, cfg.own_weight))
            if cfg.structure_weight > 0:
                structure = list(without_cla) if from_modules else list(vectors)
        translations = ctx.pair_examples(kind, texts, [None] * len(texts), list(vectors), targets, structure)
    return paraphrase, translations


def train_cla(ctx: StageContext, out: Path, run_dir: Path) -> Metrics:
    cfg, data = ctx.config.cla, ctx.data
    ctx.modular.add_alignment(ctx.lang, alignment_adapter_config(**cfg.adapter))
    use_paraphrases, use_parallel = cfg.variant in ("pp", "jt"), cfg.variant in ("pl", "jt")
    paraphrase, parallel = cla_examples(
        ctx,
        data.crosslingual if use_paraphrases else [],
        data.parallel + ctx.prepared["cla"].parallel if use_parallel else [],
    )
    dev: list[SentencePairExample] = []
    if cfg.eval_every:
        dev_cross = [(a, b, None) for a, b in data.dev_crosslingual] if use_paraphrases else []
        dev = sum(cla_examples(ctx, dev_cross, data.dev_parallel if use_parallel else []), [])
    ctx.modular.select(ctx.lang, ctx.modular.modules_of(ctx.lang))
    ctx.modular.set_trainable(ctx.lang, ["cla"])
    if cfg.variant == "jt":
        first, second = ctx.sampler(paraphrase, cfg.batch_size), ctx.sampler(parallel, cfg.batch_size)
        sampler = AlternatingBatchSampler(first, second, offset=len(paraphrase))
    else:
        sampler = ctx.sampler(paraphrase or parallel, cfg.batch_size)
    objective = SentencePairObjective(
        scale=cfg.scale, ranking_weight=cfg.ranking_weight, structure_weight=cfg.structure_weight
    )
    metrics = ctx.fit(objective, paraphrase + parallel, sampler, cfg, run_dir, dev)
    ctx.modular.save_module(ctx.lang, "cla", out)
    return metrics


def _cla_key_parts(ctx: StageContext) -> list[Any]:
    # The CLA fits the pivot's vectors: another pivot bundle retrains it. Transfer files are
    # absent when unset, so earlier keys hold.
    files = ctx.prepared["cla"].files
    return [ctx.pivot_manifest_digest] + ([files] if files else [])


STAGE_RECIPES: dict[str, StageRecipe] = {
    "vocab": StageRecipe(train_vocab, lambda ctx: ctx.needs("vocab", "mono", ctx.data.mono)),
    "la": StageRecipe(train_la, lambda ctx: ctx.needs("la", "mono", ctx.data.mono)),
    "se": StageRecipe(
        train_se, lambda ctx: ctx.needs("se", "paraphrase", ctx.data.paraphrases), evaluate_after=True
    ),
    "cla": StageRecipe(
        train_cla,
        _prepare_cla,
        key_parts=_cla_key_parts,
        evaluate_after=True,
        manifest_fields=lambda ctx: {"cla_variant": ctx.config.cla.variant},
    ),
}
PIVOT_STAGES = ["se"]  # the pivot's stages when the recipe names none (it has no cla either)


def stage_recipe(stage: str) -> StageRecipe:
    """The recipe of the stage that trains the module kind ``stage``."""
    return STAGE_RECIPES[stage]
