"""The ``cla`` stage: a parallel bottleneck adapter (adapters' ParBnConfig) that maps LANG onto
the frozen pivot's vectors: cross-lingual paraphrase MNRL (``pp``), parallel pairs (``pl``:
cosine, or distilled), or both in alternating batches (``jt``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from modsenc.data.batching import AlternatingBatchSampler
from modsenc.data.language_data import load_language_data
from modsenc.data.readers import check_language_code
from modsenc.modules.kinds.cla.config import CLAConfig, alignment_adapter_config
from modsenc.modules.kinds.stage import Metrics, Plan, StageContext, StageRecipe
from modsenc.objectives.losses.distillation import distillation_targets
from modsenc.objectives.sentence_pairs import SentencePairExample, SentencePairObjective
from modsenc.utils.errors import InputError

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Transfer:
    """What the cla stage's ``prepare`` loads: other languages' (pivot, translation) pairs
    (``cla.transfer_languages``) and their file records by language (for its cache key)."""

    parallel: list[tuple[str, str]]
    files: dict[str, list[dict[str, Any]]]


def _prepare_cla(ctx: StageContext) -> Transfer:
    variant = ctx.settings("cla").variant  # one of CLA_VARIANTS (checked by CLAConfig)
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
    return Transfer(*transfer_parallel(ctx, ctx.settings("cla").transfer_languages))


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
def nearest_pivots(
    vectors: torch.Tensor, texts: list[str], count: int, max_similarity: float, block: int = 1024
) -> list[torch.Tensor]:
    """Each pair's hard negatives: the ``count`` pivot vectors of the other pairs nearest its own
    translation's (cosine), skipping pairs with the same pivot text and any candidate at or above
    ``max_similarity`` (near-duplicates); fewer where too few remain. sentence-transformers'
    ``mine_hard_negatives`` does this from texts through a SentenceTransformer; here the vectors
    are already computed (the pivot's modules, once), so it is a blocked product and a top-k."""
    unit = torch.nn.functional.normalize(vectors.float(), dim=-1)
    first = {text: i for i, text in enumerate(dict.fromkeys(texts))}
    text_ids = torch.tensor([first[t] for t in texts])
    negatives: list[torch.Tensor] = []
    for start in range(0, len(texts), block):
        similarity = unit[start : start + block] @ unit.T
        same_text = text_ids[start : start + block, None] == text_ids[None, :]
        similarity.masked_fill_(same_text | (similarity >= max_similarity), -torch.inf)
        top = similarity.topk(min(count, len(texts)), dim=1)
        for values, indices in zip(top.values, top.indices):
            negatives.append(vectors[indices[torch.isfinite(values)]])
    return negatives


def cla_examples(
    ctx: StageContext, crosslingual: list[tuple[str, str, str | None]], parallel: list[tuple[str, str]]
) -> tuple[list[SentencePairExample], list[SentencePairExample]]:
    """(cross-lingual paraphrase examples, parallel examples): LANG's side as text, the pivot's
    as fixed vectors computed once through the pivot's own modules (its side is frozen)."""
    cfg = ctx.settings("cla")

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
            before_cla = ctx.monolingual(ctx.modular.modules_of(ctx.lang))
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
        # mined among the pairs given: the training pairs' among themselves, the dev pairs' among the
        # dev pairs, so the dev loss that stops training asks what the training loss asks
        if kind == "distill" and cfg.hard_negatives > 0:
            mined = nearest_pivots(
                vectors, [a for a, _ in parallel], cfg.hard_negatives, cfg.hard_negative_max_similarity
            )
            translations = [replace(ex, negative_vectors=v) for ex, v in zip(translations, mined)]
    return paraphrase, translations


def train_cla(ctx: StageContext, out: Path, run_dir: Path) -> Metrics:
    cfg, data = ctx.settings("cla"), ctx.data
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
        scale=cfg.scale,
        ranking_weight=cfg.ranking_weight,
        structure_weight=cfg.structure_weight,
        ranking_margin=cfg.ranking_margin,
    )
    metrics = ctx.fit(objective, paraphrase + parallel, sampler, cfg, run_dir, dev)
    ctx.modular.save_module(ctx.lang, "cla", out)
    return metrics


def _cla_key_parts(ctx: StageContext) -> list[Any]:
    # The CLA fits the pivot's vectors: another pivot bundle retrains it. Transfer files are
    # absent when unset, so earlier keys hold.
    files = ctx.prepared["cla"].files
    return [ctx.pivot_manifest_digest] + ([files] if files else [])


def _plan(ctx: StageContext) -> Plan:
    data, variant = ctx.data, ctx.settings("cla").variant
    crosslingual = len(data.crosslingual) if variant in ("pp", "jt") else 0
    parallel = len(data.parallel) + len(ctx.prepared["cla"].parallel) if variant in ("pl", "jt") else 0
    return Plan(crosslingual + parallel, f"{ctx.pivot}-{ctx.lang} pairs")


STAGE = StageRecipe(
    CLAConfig,
    train_cla,
    prepare=_prepare_cla,
    key_parts=_cla_key_parts,
    evaluate_after=True,
    manifest_fields=lambda ctx: {"cla_variant": ctx.settings("cla").variant},
    plan=_plan,
)
