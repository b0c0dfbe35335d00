"""What a module kind's training stage is written against: ``StageRecipe`` (the hooks add-language
calls), ``StageContext`` (what they are handed, named here as a protocol: the concrete one is
``modsenc.training.context.StageContext``, a layer above), ``Plan`` (what the stage trains on, for
the summary printed before training), and the settings bases ``Schedule`` and ``LoRASettings`` a
kind's recipe section builds on.

A kind's folder holds its module (``kind.py``), its settings and library config (``config.py``)
and its stage (``stage.py``, ``STAGE``); ``ModuleKind.stage()`` imports the stage when asked, so
the registry stays free of torch. No stage imports the job that runs it, nor another kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from modsenc.utils.config import RecipeError, Section

if TYPE_CHECKING:
    import numpy as np
    import torch

    from modsenc.data.batching import LengthBucketBatchSampler
    from modsenc.data.language_data import LanguageData
    from modsenc.objectives.sentence_pairs import SentencePairExample

Metrics = dict[str, float]


# ------------------------------------------------------------------------------------------ settings
@dataclass
class Schedule(Section):
    """A stage's budget and optimiser: ``epochs`` (passes over the data, may be fractional) or
    ``max_steps``, not both (``utils.config``); a linear schedule, ``warmup_ratio`` of it warming up."""

    epochs: float | None = None
    max_steps: int | None = None
    batch_size: int = 32
    lr: float = 1.0e-3
    warmup_ratio: float = 0.1
    scheduler: str = "linear"
    # Model selection on dev pairs held out of the training files (data.dev_pairs, dev_parallel):
    # every eval_every steps the stage's loss on them is measured and the best weights are kept;
    # after `patience` evaluations without improvement the stage stops. null: no selection.
    eval_every: int | None = None
    patience: int | None = None

    def steps(self, batches_per_epoch: int) -> int:
        if self.epochs is not None:
            return max(1, round(self.epochs * batches_per_epoch))
        if self.max_steps is None:
            raise RecipeError("a stage needs epochs or max_steps; both are null")
        return self.max_steps


@dataclass
class LoRASettings(Section):
    """peft LoRA: rank, alpha (the update is scaled by alpha / r) and dropout."""

    r: int = 8
    alpha: int = 16
    dropout: float = 0.1


# ------------------------------------------------------------------------------------------ context
class StageContext(Protocol):
    """What a stage reads and calls (``modsenc.training.context.StageContext`` is the one it gets)."""

    lang: str
    pivot: str
    config: Any  # the add-language recipe, for this language
    data: LanguageData
    work: Path
    recipe_path: str | None
    data_dir: str | Path | None
    modular: Any  # the ModularBackbone (None in ``prepare``)
    pivot_kinds: frozenset[str]
    pivot_manifest_digest: str | None
    prepared: Mapping[str, Any]

    @property
    def seed(self) -> int: ...

    def settings(self, stage: str) -> Any: ...

    def monolingual(self, kinds: set[str]) -> set[str]: ...

    def needs(self, stage: str, what: str, items: Sequence[Any]) -> None: ...

    def searched(self, what: str) -> str: ...

    def no_data_at_all(self) -> str: ...

    def tokenize(
        self, texts: Sequence[str], kinds: set[str] | None = None, **options: Any
    ) -> list[list[int]]: ...

    def pair_examples(
        self,
        kind: str,
        positives: list[str],
        negatives: list[str | None],
        anchors: list[Any],
        targets: list[torch.Tensor] | None = None,
        structure: list[torch.Tensor] | None = None,
    ) -> list[SentencePairExample]: ...

    def encode(self, lang: str, kinds: set[str] | frozenset[str], texts: Sequence[str]) -> np.ndarray: ...

    def sampler(
        self, examples: list, batch_size: int, drop_last: bool = True
    ) -> LengthBucketBatchSampler: ...

    def fit(
        self,
        objective: torch.nn.Module,
        examples: list,
        sampler: Any,
        cfg: Schedule,
        run_dir: Path,
        dev_examples: list | None = None,
    ) -> dict: ...


# ------------------------------------------------------------------------------------------ recipe
@dataclass(frozen=True)
class Plan:
    """What a stage trains on, for the summary printed before training: ``examples`` ``what``
    (sentences, pairs), ``drop_last`` as its sampler; ``trains`` False for a stage without
    optimiser steps (the vocabulary), described as ``note`` instead of steps."""

    examples: int
    what: str
    drop_last: bool = True
    trains: bool = True
    note: str = ""


def _nothing(ctx: StageContext) -> Any:
    return []


def _no_fields(ctx: StageContext) -> dict[str, Any]:
    return {}


def _no_plan(ctx: StageContext) -> Plan | None:
    return None


@dataclass(frozen=True)
class StageRecipe:
    """How add-language trains one module kind (the stage of the same name)."""

    settings: type[Section]
    """The kind's recipe section (``add-language``'s key of the kind's name, ``per_language`` too)."""
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
    manifest_fields: Callable[[StageContext], dict[str, Any]] = _no_fields
    """``BundleManifest`` fields it fills in."""
    plan: Callable[[StageContext], Plan | None] = _no_plan
    """What it trains on, for the summary printed before training (None: no line)."""
