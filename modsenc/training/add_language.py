"""Recipe entry point for ``modsenc add-language LANG``: specialise the frozen backbone for one language.

Stages (Huang et al., 2025), one per module kind (``modsenc.modules.kinds``), each trained with
everything else frozen; what each does is its stage, ``modsenc/modules/kinds/KIND/stage.py``.

Work happens in ``--work-dir`` (default ``runs/add-language/LANG``): every stage writes its
module to ``WORK/STAGE/module`` when it finishes, with a key that hashes its configuration, the
data and the stages before it. ``--resume`` reuses finished stages whose key still matches and
continues a killed stage from its last checkpoint; so changing only ``cla.variant`` retrains only
the CLA. The bundle is then installed into the zoo in one atomic step. Nothing here writes to
the backbone or to another language's bundle.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from modsenc.backbone.encoder import Backbone
from modsenc.backbone.truncation import TruncationCount, counting_truncations
from modsenc.data.language_data import LanguageData, load_language_data
from modsenc.data.orthography import get_orthography, orthography_for
from modsenc.data.scripts import detect_script
from modsenc.data.specs import resolve_data_spec
from modsenc.eval.bitext import precision_at_1
from modsenc.eval.sts import evaluate_sts, load_sts
from modsenc.modules.bundle import CALIBRATION_FILE, Zoo, check_language_code, check_outside_zoo
from modsenc.modules.kinds import MODULE_KINDS, kinds_in, monolingual
from modsenc.modules.manifest import default_mode_caveats, stages_precision
from modsenc.modules.modular import ModularBackbone
from modsenc.routing.acceptance import calibrate as calibrate_acceptance
from modsenc.routing.langid import LANGID_FILE, build_profile
from modsenc.runtimes.calibration import even_sample
from modsenc.training.configs import AddLanguageRecipe, stage_names
from modsenc.training.context import StageContext
from modsenc.training.stage_cache import KEY_FILE, StageDir
from modsenc.training.stages import PIVOT_STAGES, stage_recipe
from modsenc.training.summary import data_summary
from modsenc.training.train_backbone import seed_everything
from modsenc.utils.errors import MissingFileError
from modsenc.utils.io import atomic_directory, atomic_write_json, atomic_write_text, json_digest
from modsenc.utils.outputs import check_output_location, run_lock

log = logging.getLogger(__name__)

WORK_MARKER = "modsenc_add_language.json"  # in every work dir this command created


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def _owns_work_dir(work: Path) -> bool:
    """True for a work dir this command created: it holds WORK_MARKER, or (runs from before the
    marker) only stage folders with their key files and the language profile."""
    if (work / WORK_MARKER).is_file():
        return True
    names = {p.name for p in work.iterdir()}
    stages = stage_names()
    return names <= {*stages, LANGID_FILE} and any((work / s / KEY_FILE).is_file() for s in stages)


def _check_work_dir(work: Path, zoo: Zoo) -> None:
    if work.exists() and not work.is_dir():
        raise FileExistsError(f"--work-dir {work} is a file; give a folder")
    check_outside_zoo(work, zoo, "--work-dir")
    if _has_files(work) and not _owns_work_dir(work):
        raise FileExistsError(
            f"--work-dir {work} is a non-empty folder that add-language did not create (no {WORK_MARKER}); "
            "it is left untouched: choose a new or empty folder"
        )


def _clear_work_dir(work: Path) -> None:
    """``--overwrite``: remove this command's own stage folders and files, nothing else."""
    if not work.is_dir():
        return
    for name in (*stage_names(), LANGID_FILE, CALIBRATION_FILE):
        path = work / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


# --------------------------------------------------------------------------------------------- stages
def _stage_key(
    previous: str, stage: str, config: AddLanguageRecipe, data: LanguageData, orthography: str = "none"
) -> str:
    """What a stage's result depends on: the stages before it (``previous``), its configuration
    resolved (every default filled in: a default changed in code retrains it), the data's files."""
    return json_digest(
        {
            "previous": previous,
            "stage": stage,
            "config": config.stage_settings(stage).to_dict(),
            "training": config.training.to_dict(),
            "seed": config.seed,
            "max_length": config.max_length,
            "data": data.files,
            "dev_pairs": config.data.dev_pairs,
            "dev_parallel": config.data.dev_parallel,
            "orthography": orthography,
        }
    )


class AddLanguage:
    """One ``add-language`` run: the components are built in ``__init__``, ``run()`` trains and installs."""

    def __init__(
        self,
        lang: str,
        recipe: AddLanguageRecipe | Mapping[str, Any],
        zoo_dir: str | Path,
        backbone_dir: str | Path | None = None,
        work_dir: str | Path | None = None,
        stages: list[str] | None = None,
        resume: bool = False,
        overwrite: bool = False,
        callbacks: tuple = (),
        data_dir: str | Path | None = None,
    ) -> None:
        self.lang = check_language_code(lang)
        self.data_dir = data_dir  # stands for ../shared/data in the recipe's paths (--data)
        self.callbacks = callbacks  # (stage, step, metrics) -> None, called after every training step
        # load_recipe's typed recipe as it is (a mapping, from the Python API, is validated here)
        self.config = config = AddLanguageRecipe.of(recipe).for_language(self.lang)
        self.recipe_path = config.recipe_path
        self.pivot = check_language_code(config.pivot)
        self.seed = config.seed
        self.zoo = Zoo(zoo_dir)
        self.stages = self._resolve_stages(stages)
        self.work = default_work_dir(lang, work_dir)
        self.resume = resume
        # Every input is validated before any output is touched, and only folders this command
        # created (WORK_MARKER) are ever cleared.
        inputs = self._check_inputs(resume or overwrite)
        self.backbone_dir = self.zoo.install_backbone(backbone_dir)
        if overwrite:
            _clear_work_dir(self.work)
        self.work.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.work / WORK_MARKER, {"command": "add-language", "language": self.lang})
        self._build_modular()
        # What every stage is handed (and all it is handed): the stages never read this job.
        self.context = dataclasses.replace(
            inputs,
            modular=self.modular,
            pivot_kinds=frozenset(self.pivot_kinds),
            pivot_manifest_digest=self.pivot_manifest_digest,
        )

    def _check_inputs(self, reuse_work: bool) -> StageContext:
        """The work dir, the pivot, the data (the stages' and the dev STS files), before any output;
        returns the stages' context without the backbone, with what their ``prepare`` loaded."""
        _check_work_dir(self.work, self.zoo)
        if _has_files(self.work) and not reuse_work:
            raise FileExistsError(
                f"{self.work} holds an earlier run of add-language {self.lang}: pass --resume to reuse "
                "its finished "
                "stages (and continue a killed one), or --overwrite to start over"
            )
        aligning = [s for s in self.stages if MODULE_KINDS[s].crosslingual]
        if aligning and self.pivot not in self.zoo.languages():
            raise FileNotFoundError(
                f"the {aligning[0]} stage aligns {self.lang} to the pivot {self.pivot!r}, which is not "
                f"installed in {self.zoo.root}: "
                f"run `modsenc add-language {self.pivot}` first"
            )
        # Data errors first: they are the most likely, and cost nothing to find.
        self.data = load_language_data(
            self.lang, self.pivot, self.config.data, self.recipe_path, self.data_dir
        )
        inputs = StageContext(
            lang=self.lang,
            pivot=self.pivot,
            config=self.config,
            data=self.data,
            work=self.work,
            recipe_path=self.recipe_path,
            data_dir=self.data_dir,
            resume=self.resume,
            callbacks=tuple(self.callbacks),
        )
        prepared = {stage: stage_recipe(stage).prepare(inputs) for stage in self.stages}
        self.sts = [load_sts(p) for p in self._dev_sts_files()]
        return dataclasses.replace(inputs, prepared=prepared)

    def _dev_sts_files(self) -> list[Any]:
        """The recipe's dev STS files; one of ``../shared/data`` that is not there (an installed
        package, or a --data folder without eval-dev/) is left out with a warning: it scores, it
        does not train."""
        files = []
        for spec in self.config.dev.sts:
            try:
                files.append(resolve_data_spec(spec, self.recipe_path, self.data_dir))
            except MissingFileError as err:
                log.warning("[%s] dev STS left out (it scores, it does not train): %s", self.lang, err)
        return files

    def _build_modular(self) -> None:
        """The backbone with LANG's orthography, and the pivot's modules (its vectors are the CLA's
        targets and the cross-lingual dev metrics' anchors)."""
        config = self.config
        if config.training.num_threads:
            torch.set_num_threads(config.training.num_threads)
        backbone = Backbone.from_pretrained(
            self.backbone_dir, attention=config.attention, max_length=config.max_length
        )
        self.modular = ModularBackbone(backbone)
        name = config.orthography
        self.orthography = orthography_for(self.lang) if name in (None, "auto") else get_orthography(name)
        self.modular.set_orthography(self.lang, self.orthography)
        self.pivot_kinds: set[str] = set()
        self.pivot_manifest_digest: str | None = None
        if self.lang != self.pivot and self.pivot in self.zoo.languages():
            pivot_manifest = self.zoo.read_compatible_manifest(self.pivot)
            # what the pivot's vectors depend on: its modules and their files' contents
            self.pivot_manifest_digest = json_digest(
                {k: getattr(pivot_manifest, k) for k in ("stages", "modules", "orthography", "file_sha256")}
            )
            loaded = self.modular.load_bundle(self.zoo.bundle_dir(self.pivot), self.pivot)
            self.pivot_kinds = monolingual(loaded)  # the pivot's vectors: through its own modules

    def _resolve_stages(self, stages: list[str] | None) -> list[str]:
        if stages is None:
            stages = self.config.stages
            if isinstance(stages, dict):  # per language, e.g. {default: [se, cla], tr: [cla]}
                if self.lang in stages:
                    stages = stages[self.lang]
                else:  # the shared default: the pivot has no cla
                    stages = [s for s in stages.get("default") or [] if not self._pivots_crosslingual(s)]
            stages = stages or (list(PIVOT_STAGES) if self.lang == self.pivot else list(stage_names()))
        if list(stages) == ["none"]:
            # A strong multilingual backbone may need nothing for the pivot: its bundle then holds
            # only what the router needs, and the other languages align to the bare backbone.
            if self.lang != self.pivot:
                raise ValueError(f"stages 'none' is for the pivot ({self.pivot}) only, not {self.lang}")
            return []
        known = stage_names()
        unknown = [s for s in stages if s not in known]
        if unknown:
            raise ValueError(
                f"unknown stage(s) {unknown}; stages are {', '.join(known)} (or none, for the pivot)"
            )
        aligning = [s for s in stages if self._pivots_crosslingual(s)]
        if aligning:
            raise ValueError(
                f"{self.lang} is the pivot: it has no {aligning[0]} stage (other languages are aligned to it)"
            )
        if not stages:
            raise ValueError("no stages to run")
        return [s for s in known if s in stages]  # always in pipeline order

    def _pivots_crosslingual(self, stage: str) -> bool:
        """True for a cross-lingual stage (the CLA) of the pivot, which is aligned to nothing."""
        return self.lang == self.pivot and stage in MODULE_KINDS and MODULE_KINDS[stage].crosslingual

    # ----------------------------------------------------------------------------------------- evaluation
    def encoder(self, lang: str, kinds: set[str] | frozenset[str]):
        """``texts -> vectors`` through ``lang``'s ``kinds`` (``StageContext.encode``)."""
        return lambda texts: self.context.encode(lang, kinds, texts)

    def evaluate(self, kinds: set[str]) -> dict[str, Any]:
        """Dev metrics with LANG's ``kinds`` loaded.

        Monolingual tasks run without the CLA, cross-lingual ones with it (as in the paper).
        """
        mono_kinds, pivot_kinds = monolingual(kinds), (self.pivot_kinds if kinds else set())
        mono, cross = self.encoder(self.lang, mono_kinds), self.encoder(self.lang, kinds)
        metrics: dict[str, Any] = {}
        dev = self.data.dev_paraphrases
        if dev:
            metrics["paraphrase_p@1"] = precision_at_1(
                mono([p.anchor for p in dev]), mono([p.positive for p in dev])
            )
        if self.data.dev_crosslingual:
            anchors = self.encoder(self.pivot, pivot_kinds)([a for a, _ in self.data.dev_crosslingual])
            metrics["crosslingual_p@1"] = precision_at_1(
                anchors, cross([b for _, b in self.data.dev_crosslingual])
            )
        for pairs in self.sts:
            present = {(p.lang1, p.lang2) for p in pairs}
            wanted = [(self.lang, self.lang)] + ([(self.pivot, self.lang)] if self.lang != self.pivot else [])
            wanted = [lp for lp in wanted if lp in present]
            encoders = {self.lang: mono}
            own = [lp for lp in wanted if lp == (self.lang, self.lang)]
            results = evaluate_sts(pairs, encoders, own)
            if own and kinds != mono_kinds:  # what encode gives by default: through the CLA
                default_mode = evaluate_sts(pairs, {self.lang: cross}, own)
                metrics.setdefault("sts_spearman_default_mode", {}).update(default_mode)
            if (self.pivot, self.lang) in wanted:
                encoders = {self.pivot: self.encoder(self.pivot, pivot_kinds), self.lang: cross}
                results.update(evaluate_sts(pairs, encoders, [(self.pivot, self.lang)]))
            metrics.setdefault("sts_spearman", {}).update(results)
        return metrics

    # ----------------------------------------------------------------------------------------- stages
    def _load_stage(self, out: Path) -> None:
        """Bring a finished stage's modules back (``--resume``) instead of training them again."""
        for kind in kinds_in(out):  # the la stage's folder also holds the embeddings it trained
            self.modular.load_module(self.lang, kind, out)

    # ----------------------------------------------------------------------------------------- run
    def run(self) -> Path:
        started = time.time()
        seconds: dict[str, float] = {}
        stage_metrics: dict[str, Any] = {}
        for line in data_summary(self.context, self.stages):
            log.info("[%s] %s", self.lang, line)
        with counting_truncations() as cut:
            dev: dict[str, Any] = {"backbone": self.evaluate(set())}
        log.info("[%s] dev, backbone alone: %s", self.lang, json.dumps(dev["backbone"]))
        self._report_truncated(cut, "dev")
        key = self.zoo.backbone_fingerprint()
        for index, stage in enumerate(self.stages):
            key = _stage_key(key, stage, self.config, self.data, self.orthography.name)
            for part in stage_recipe(stage).key_parts(self.context):
                key = json_digest([key, part])
            with counting_truncations() as cut:  # one counted line a stage, not a warning a batch
                self._run_stage(index, stage, key, stage_metrics, seconds, dev)
            self._report_truncated(cut, stage)
        target = self.install(dev, stage_metrics, seconds, time.time() - started)
        log.info("[%s] bundle written to %s in %.0f s", self.lang, target, time.time() - started)
        return target

    def _run_stage(
        self,
        index: int,
        stage: str,
        key: str,
        stage_metrics: dict[str, Any],
        seconds: dict[str, float],
        dev: dict[str, Any],
    ) -> None:
        """Train ``stage`` (or reuse it, ``--resume``), then its dev metrics; fills the three dicts."""
        cache = StageDir(self.work / stage, "module", command="add-language", option="--work-dir")
        done = cache.finished(key) if self.resume else None
        if done:
            log.info("[%s] stage %s: finished earlier, reusing %s", self.lang, stage, cache.output)
            self._load_stage(cache.output)
            stage_metrics[stage], seconds[stage] = done["metrics"], done["seconds"]
        else:
            cache.begin(key, self.resume)  # a stale stage (other config or data) starts over
            log.info("[%s] stage %s (%d/%d)", self.lang, stage, index + 1, len(self.stages))
            t0 = time.time()
            seed_everything(self.seed + index)
            with atomic_directory(cache.output) as tmp:
                metrics = stage_recipe(stage).train(self.context, tmp, cache.run_dir)
            seconds[stage] = round(time.time() - t0, 1)
            stage_metrics[stage] = metrics
            cache.finish(key, {"metrics": metrics, "seconds": seconds[stage]})
        loaded = self.modular.modules_of(self.lang)
        if stage_recipe(stage).evaluate_after or stage == self.stages[-1]:
            dev[stage] = self.evaluate(loaded)
            log.info("[%s] dev after %s: %s", self.lang, stage, json.dumps(dev[stage]))

    def _report_truncated(self, count: TruncationCount, what: str) -> None:
        """One line for the sentences cut to the token limit in ``what`` (a stage, or dev)."""
        line = count.line(what)
        if line:  # the sentences tokenised: the stage's training and dev pairs, both languages
            log.warning("[%s] %s (training and dev, %s and %s)", self.lang, line, self.lang, self.pivot)

    def install(
        self, dev: dict[str, Any], stage_metrics: dict[str, Any], seconds: dict[str, float], wall: float
    ) -> Path:
        # What the router needs to recognise this language: all of this language's text (and
        # only this language's), in every script the orthography declares (Uzbek: Latin and
        # Cyrillic), so both route here.
        langid_texts = self.data.texts()
        profile = build_profile(self.lang, langid_texts, self.orthography.script_variants)
        # the bundle's acceptance test (issue 48), on the sentences the profile leaves out
        profile.acceptance = calibrate_acceptance(profile)
        langid_path = self.work / LANGID_FILE
        profile.save(langid_path)
        langid_sentences = len(langid_texts)
        stage_fields = {
            k: v for s in self.stages for k, v in stage_recipe(s).manifest_fields(self.context).items()
        }
        # what an int8 graph of this language is calibrated on (runtimes/calibration.py)
        calibration_path = self.work / CALIBRATION_FILE
        atomic_write_text(calibration_path, "".join(f"{text}\n" for text in even_sample(langid_texts)))
        return self.modular.save_bundle(
            self.zoo,
            self.lang,
            [self.work / stage / "module" for stage in self.stages],
            pivot=self.pivot,
            stages=self.stages,
            script=detect_script(self.data.mono or [p.anchor for p in self.data.paraphrases]),
            router={
                "langid": LANGID_FILE,
                "kind": "char-ngram-naive-bayes",
                "sentences": langid_sentences,
                "scripts": sorted(profile.scripts),
                **({"acceptance": profile.acceptance.to_dict()} if profile.acceptance else {}),
            },
            router_files={LANGID_FILE: langid_path},
            extra_files={CALIBRATION_FILE: calibration_path},
            record={
                "precision": stages_precision(stage_metrics),
                **stage_fields,  # the CLA's variant
                "data": {"files": self.data.files, "counts": self.data.counts()},
                "training": self.config.to_dict(),
                "recipe_path": self.recipe_path,
                "stage_metrics": stage_metrics,
                "stage_seconds": seconds,
                "dev_metrics": dev,
                "caveats": default_mode_caveats(dev, self.lang),
                "wall_seconds": round(wall, 1),
            },
        )


def default_work_dir(lang: str, work_dir: str | Path | None = None) -> Path:
    return Path(work_dir or Path("runs") / "add-language" / lang)


def run(
    lang: str, recipe: AddLanguageRecipe | Mapping[str, Any], zoo_dir: str | Path, **options: Any
) -> Path:
    work = default_work_dir(check_language_code(lang), options.get("work_dir"))
    # Where it writes is checked before the lock (a lock beside a work dir inside the zoo would be
    # left in the zoo): the zoo is no backbone, bundle or export and not in one, the work dir
    # outside the zoo.
    check_output_location(zoo_dir, "--zoo", inputs=[options.get("backbone_dir")], own_kind="zoo")
    check_outside_zoo(work, Zoo(zoo_dir), "--work-dir")
    # Two runs on one work dir would mix their stages: the second stops at once (run_lock).
    with run_lock(work, "add-language"):
        return AddLanguage(lang, recipe, zoo_dir, **options).run()
