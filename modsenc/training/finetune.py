"""Recipe entry point for ``modsenc finetune``: full-parameter fine-tuning of a backbone on paraphrases.

These are the modular paper's baselines (Huang et al., 2025, Tables 1-2): every parameter of the
backbone is trained, with its own multilingual tokenizer, on

    mono   monolingual paraphrase pairs of all languages (anchor and positive in one language)
    cross  cross-lingual paraphrase pairs: the pivot's anchor with the other language's positive

and ``Full_mc`` is ``mono`` then ``cross``, in sequence. The pairs are exactly those that
``add-language`` trains its SE (mono) and CLA-pp (cross) modules on, read by the same function from
the same recipe ``data`` section, with the same dev pairs held out, so a modular zoo and these
baselines can be compared on equal data.

Each phase writes ``OUTPUT/<phases so far>/backbone`` (``m``, ``c``, ``mc``): ``--pairs mono,cross``
reuses a finished ``m`` whose key (config, data, starting backbone) still matches, so Full_m and
Full_mc share their first phase. A killed phase continues from its last checkpoint with ``--resume``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from peft import get_peft_model

from modsenc.backbone.encoder import Backbone, load_manifest
from modsenc.data.batching import LengthBucketBatchSampler
from modsenc.data.language_data import DataFiles, LanguageData, load_language_data
from modsenc.modules.bundle import check_language_code
from modsenc.modules.configs import sentence_adapter_config
from modsenc.objectives.sentence_pairs import SentencePairObjective, pair_examples
from modsenc.training.configs import FinetuneRecipe, PhaseConfig
from modsenc.training.loop import fit_stage
from modsenc.training.stage_cache import StageDir
from modsenc.training.train_backbone import seed_everything
from modsenc.utils.io import json_digest
from modsenc.utils.outputs import check_output_location

log = logging.getLogger(__name__)

PAIR_KINDS = ("mono", "cross", "mixed")

Triple = tuple[str, str, str | None]  # (anchor, positive, hard negative or None)


@dataclass
class PhasePairs:
    """One phase's pairs: ``train``, ``dev`` (held out of the training files, for early stopping),
    how many training pairs each language gave, and the records (path, sha256, rows) of the files."""

    train: list[Triple]
    dev: list[Triple]
    counts: dict[str, int]
    files: dict[str, list[dict[str, Any]]]


def _language_pairs(kind: str, data: LanguageData) -> tuple[list[Triple], list[Triple]]:
    """(training, dev) pairs of one language for a phase of ``kind``."""
    mono = [(p.anchor, p.positive, p.negative) for p in data.paraphrases]
    dev_mono = [(p.anchor, p.positive, p.negative) for p in data.dev_paraphrases]
    if kind == "mono":
        return mono, dev_mono
    if kind == "cross":  # empty for the pivot
        return list(data.crosslingual), [(a, b, None) for a, b in data.dev_crosslingual]
    # mixed: what a user would try first, everything in one phase (pivot sentence -> translation)
    parallel = [(a, b, None) for a, b in data.parallel]
    return mono + parallel, dev_mono + [(a, b, None) for a, b in data.dev_parallel]


def load_pairs(kind: str, recipe: FinetuneRecipe | Mapping[str, Any]) -> PhasePairs:
    """The pairs of one phase: mono (paraphrases), cross (pivot-LANG paraphrases) or mixed
    (paraphrases and parallel pairs with the pivot), read as add-language reads them."""
    if kind not in PAIR_KINDS:
        raise ValueError(f"pairs must be one of {', '.join(PAIR_KINDS)}, got {kind!r}")
    config = FinetuneRecipe.of(recipe)
    pivot = check_language_code(config.pivot)
    languages = [check_language_code(code) for code in config.languages]
    if not languages:
        raise ValueError("the recipe's `languages` list is empty: name the languages to fine-tune on")
    # Monolingual text belongs to other stages; parallel data only to the mixed phase.
    with_parallel = kind == "mixed"
    own = {
        lang: DataFiles(paraphrase=files.paraphrase, parallel=files.parallel if with_parallel else [])
        for lang, files in config.data.per_language.items()
    }
    parallel = config.data.parallel if with_parallel else []
    data_cfg = replace(config.data, mono=[], parallel=parallel, per_language=own)
    phase = PhasePairs([], [], {}, {})
    for lang in languages:
        data = load_language_data(lang, pivot, data_cfg, config.recipe_path)
        train, dev = _language_pairs(kind, data)
        phase.train.extend(train)
        phase.dev.extend(dev)
        phase.counts[lang] = len(train)
        phase.files[lang] = data.files["paraphrase"] + (data.files["parallel"] if with_parallel else [])
    if not phase.train:
        raise ValueError(f"no {kind} pairs for {languages} in {config.data.as_written()}")
    return phase


def _phase_key(
    previous: str, kind: str, config: FinetuneRecipe, files: dict[str, list[dict[str, Any]]]
) -> str:
    """What a phase's result depends on: the phases before it (``previous``), its configuration
    resolved (every default filled in: a default changed in code retrains it), the data."""
    payload = {
        "previous": previous,
        "pairs": kind,
        "config": getattr(config, kind).to_dict(),
        "training": config.training.to_dict(),
        "seed": config.seed,
        "max_length": config.max_length,
        "data": config.data.to_dict(),
        "files": files,  # sha256 of every file: edited data retrains even with the same paths
    }
    return json_digest(payload)


def _examples(backbone: Backbone, pairs: list[Triple]) -> list:
    positives, negatives, anchors = (
        zip(*[(p, n, a) for a, p, n in pairs], strict=True) if pairs else ((), (), ())
    )
    return pair_examples(backbone.tokenize, "paraphrase", list(positives), list(negatives), list(anchors))


def _train_phase(
    backbone: Backbone,
    pairs: PhasePairs,
    cfg: PhaseConfig,
    config: FinetuneRecipe,
    run_dir: Path,
    resume: bool,
    seed: int,
) -> dict[str, float]:
    """Train ``backbone`` in place on one phase's pairs (MNRL); with ``cfg.lora_r``, through a LoRA
    on every linear layer that is merged into the weights at the end."""
    examples = _examples(backbone, pairs.train)
    dev = _examples(backbone, pairs.dev) if cfg.eval_every else []
    sampler = LengthBucketBatchSampler(
        [e.length for e in examples], cfg.batch_size, seed=seed, drop_last=len(examples) > cfg.batch_size
    )
    lora = None
    if cfg.lora_r is not None:  # peft freezes everything else; its layers are injected in place
        lora = get_peft_model(backbone, sentence_adapter_config(cfg.lora_r, cfg.lora_alpha, cfg.lora_dropout))
    metrics = fit_stage(
        backbone,
        SentencePairObjective(scale=cfg.scale),
        examples,
        sampler,
        cfg,
        config.training,
        run_dir,
        resume=resume,
        seed=seed,
        trainable_only=lora is not None,
        dev_examples=dev,
    )
    if lora is not None:
        lora.merge_and_unload()  # the LoRA's update folded into backbone's own weights
    return metrics


def run(
    recipe: FinetuneRecipe | Mapping[str, Any],
    backbone_dir: str | Path,
    output_dir: str | Path,
    pairs: Sequence[str] = ("mono",),
    resume: bool = False,
) -> Path:
    """Fine-tune every parameter, one phase per entry of ``pairs``; returns the last backbone dir."""
    if not pairs:
        raise ValueError("--pairs is empty: give mono, cross or mono,cross")
    # Not inside a zoo, bundle or backbone, nor the backbone it starts from (its phases are its own).
    output_dir = check_output_location(output_dir, "--output", inputs=[backbone_dir])
    config = FinetuneRecipe.of(recipe)  # load_recipe's typed recipe, or a mapping validated here
    seed = config.seed
    if config.training.num_threads:
        torch.set_num_threads(config.training.num_threads)
    try:
        key = load_manifest(backbone_dir)["fingerprint"]
    except FileNotFoundError:  # a Hugging Face directory or hub name, not written by modsenc
        key = str(backbone_dir)
    source = Path(backbone_dir)
    for index, kind in enumerate(pairs):
        phase_pairs = load_pairs(kind, config)
        key = _phase_key(key, kind, config, phase_pairs.files)
        phase = StageDir(
            output_dir / "".join(k[0] for k in pairs[: index + 1]),
            "backbone",
            command="finetune",
            option="--output",
        )
        if phase.finished(key):
            log.info("[finetune] phase %s: finished earlier, reusing %s", phase.name, phase.output)
            source = phase.output
            continue
        phase.begin(key, resume)  # another config, data or starting point starts over
        log.info("[finetune] phase %s: %s pairs %s, from %s", phase.name, kind, phase_pairs.counts, source)
        started = time.time()
        seed_everything(seed + index)
        backbone = Backbone.from_pretrained(source, max_length=config.max_length)
        cfg = getattr(config, kind)
        metrics = _train_phase(backbone, phase_pairs, cfg, config, phase.run_dir, resume, seed)
        seconds = round(time.time() - started, 1)
        backbone.eval().save_pretrained(
            phase.output,
            manifest_extra={
                "finetune": {
                    "phases": list(pairs[: index + 1]),
                    "pair_counts": phase_pairs.counts,
                    "started_from": str(backbone_dir),
                    "recipe": config.to_dict(),
                    "metrics": metrics,
                    "seconds": seconds,
                }
            },
        )
        phase.finish(key, {"metrics": metrics, "seconds": seconds})
        log.info("[finetune] phase %s: %.0f s, backbone written to %s", phase.name, seconds, phase.output)
        source = phase.output
    return source
