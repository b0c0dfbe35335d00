"""What an add-language stage is handed: ``StageContext``, frozen, with the few operations a stage
needs (``fit``, ``sampler``, ``pair_examples``, ``encode``) as its methods.

The job (``modsenc.training.add_language.AddLanguage``) builds one context and passes it down to
each stage's ``prepare``, ``train``, ``key_parts``, ``manifest_fields`` and ``plan``; a stage reads
the context and returns what it made (its metrics, what it loaded), and never reaches back into
the job. The stages live with their kinds (``modsenc/modules/kinds/KIND/stage.py``), a layer
below, written against this class's protocol (``modsenc.modules.kinds.stage.StageContext``): they
import neither this module nor the job's (import-linter contracts in pyproject.toml). ``prepare``
runs before the backbone is loaded (``modular`` is None then); what it returns is in ``prepared``
of the context the other hooks get.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modsenc.data.batching import LengthBucketBatchSampler
from modsenc.modules.kinds import monolingual
from modsenc.objectives.sentence_pairs import SentencePairExample, pair_examples
from modsenc.training.loop import fit_stage
from modsenc.utils.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import torch

    from modsenc.data.language_data import LanguageData
    from modsenc.modules.modular import ModularBackbone
    from modsenc.training.configs import AddLanguageRecipe, Schedule

StepCallback = Callable[[str, int, dict], None]  # (stage, step, metrics), after every training step


@dataclass(frozen=True)
class StageContext:
    """One add-language run as its stages see it: the language, the recipe, the data, the modules."""

    lang: str
    pivot: str
    config: AddLanguageRecipe  # for this language (``per_language`` merged in)
    data: LanguageData
    work: Path  # the run's work dir (a stage may keep files under WORK/STAGE)
    recipe_path: str | None = None
    data_dir: str | Path | None = None  # --data: stands for ../shared/data in the recipe's paths
    resume: bool = False
    callbacks: tuple[StepCallback, ...] = ()
    modular: ModularBackbone | None = None  # None while the stages prepare (before the backbone)
    pivot_kinds: frozenset[str] = frozenset()  # the pivot's modules its vectors go through
    pivot_manifest_digest: str | None = None  # what the pivot's vectors depend on (None: no pivot bundle)
    prepared: Mapping[str, Any] = field(default_factory=dict)  # stage -> what its prepare returned

    @property
    def seed(self) -> int:
        return self.config.seed

    def settings(self, stage: str) -> Any:
        """``stage``'s recipe section (its kind's ``config.py``), ``per_language`` merged in."""
        return self.config.stage_settings(stage)

    def monolingual(self, kinds: set[str]) -> set[str]:
        """``kinds`` without the cross-lingual ones (the CLA): what ``mode="mono"`` encodes with."""
        return monolingual(kinds)

    # ----------------------------------------------------------------------------------------- data
    def searched(self, what: str) -> str:
        """Which files of the recipe were read for ``what`` data, for an error that says so."""
        names = [Path(r.get("path") or r.get("spec", "?")).name for r in self.data.files.get(what, [])]
        if not names:
            return "the recipe lists no such file"
        return f"none of {', '.join(names)} has any"

    def no_data_at_all(self) -> str:
        """For a data error: that the recipe's files hold nothing at all for LANG (a language the
        recipe does not cover), else nothing."""
        if any(self.data.counts().values()):
            return ""
        name = Path(self.recipe_path).stem if self.recipe_path else "the recipe"
        return f" ({name}'s data has no {self.lang} rows at all: {self.lang} needs files of its own)"

    def needs(self, stage: str, what: str, items: Sequence[Any]) -> None:
        """Stop before any output when ``stage`` has no LANG ``what`` data (mono, paraphrase)."""
        if not items:
            raise InputError(
                f"stage {stage} needs {self.lang} {what} data and "
                f"{self.searched(what)}{self.no_data_at_all()}: "
                f"pass --{what} FILE, --data DIR (a data folder whose files have {self.lang} rows), leave "
                "the stage out (--stages), or make data with `modsenc synthesize`"
            )

    # ----------------------------------------------------------------------------------------- text
    def tokenize(
        self, texts: Sequence[str], kinds: set[str] | None = None, **options: Any
    ) -> list[list[int]]:
        """LANG's token ids of ``texts`` through its modules (``kinds``; default all loaded): its
        orthography, the backbone's prefix, its tokenizer (``ModularBackbone.tokenize`` names the
        language; nothing depends on which language the layers hold)."""
        return self.modular.tokenize(self.lang, list(texts), kinds, **options)

    def pair_examples(
        self,
        kind: str,
        positives: list[str],
        negatives: list[str | None],
        anchors: list[Any],
        targets: list[torch.Tensor] | None = None,
        structure: list[torch.Tensor] | None = None,
    ) -> list[SentencePairExample]:
        """Sentence-pair examples of LANG's text (``objectives.sentence_pairs.pair_examples``)."""

        def tokenize(texts: list[str]) -> list[list[int]]:  # cut sentences counted (the job's run)
            return self.tokenize(texts, warn_truncated=True)

        return pair_examples(tokenize, kind, positives, negatives, anchors, targets, structure)

    def encode(self, lang: str, kinds: set[str] | frozenset[str], texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` through ``lang``'s ``kinds`` (no kinds: the bare backbone, without
        the language's orthography either: the baseline)."""
        return self.modular.encode(list(texts), lang if kinds else None, set(kinds), batch_size=64)

    # ----------------------------------------------------------------------------------------- training
    def sampler(self, examples: list, batch_size: int, drop_last: bool = True) -> LengthBucketBatchSampler:
        # drop_last keeps in-batch negatives at full strength, unless the data is a single batch.
        drop = drop_last and len(examples) > batch_size
        return LengthBucketBatchSampler(
            [e.length for e in examples], batch_size, seed=self.seed, drop_last=drop
        )

    def fit(
        self,
        objective: torch.nn.Module,
        examples: list,
        sampler: Any,
        cfg: Schedule,
        run_dir: Path,
        dev_examples: list | None = None,
    ) -> dict:
        """Train the trainable parameters on ``examples`` (``training.loop.fit_stage``); the stage
        is ``run_dir``'s parent folder's name (WORK/STAGE/run), as the callbacks are told."""
        stage = run_dir.parent.name
        callbacks = tuple(lambda step, metrics, cb=cb: cb(stage, step, metrics) for cb in self.callbacks)
        return fit_stage(
            self.modular.backbone,
            objective,
            examples,
            sampler,
            cfg,
            self.config.training,
            run_dir,
            self.resume,
            self.seed,
            callbacks,
            dev_examples=dev_examples or (),
        )
