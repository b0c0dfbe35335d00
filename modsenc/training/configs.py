"""The recipe sections of ``add-language`` and ``finetune``, typed, with their defaults.

Each section is a dataclass (``modsenc.utils.config.Section``): a key a recipe leaves out takes
the default written here, and nowhere else; a key no section declares is an error listing the
keys it does declare. The defaults are what the code used when a recipe left a key out; the few
keys that had no default (a stage's ``batch_size``, ``lr`` and budget) take the values of the
default recipes, ``recipes/add-language.yaml`` and ``recipes/full-finetune-cpu.yaml``.

Cache keys (``add-language`` stages, ``finetune`` phases) and manifests record the recipe as
written, not with these defaults filled in, so runs from before these classes still resume.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modsenc.backbone.precision import PRECISIONS
from modsenc.data.language_data import DataConfig
from modsenc.utils.config import RecipeError, Section

STAGES = ("vocab", "la", "se", "cla")
CLA_VARIANTS = ("pp", "pl", "jt")
PARALLEL_LOSSES = ("cosine", "distill")


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
class VocabConfig(Section):
    """``vocab``: a SentencePiece vocabulary for the language, FOCUS-initialised embeddings."""

    vocab_size: int = 8000
    fasttext_dim: int = 100  # FOCUS's auxiliary fastText embeddings, trained on the mono text
    fasttext_epochs: int = 3
    fasttext_min_count: int = 10


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
    # distill only: weight λ of the frozen backbone's own vector of the sentence in the target
    # (t_pivot + λ t_own) / (1 + λ), which keeps the language's monolingual neighbourhood.
    own_weight: float = 0.0
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
        if self.own_weight < 0:
            raise RecipeError(f"{where}.own_weight must be >= 0, got {self.own_weight}")


@dataclass
class DevConfig(Section):
    """``dev``: what is scored after the stages (besides the held-out paraphrase pairs)."""

    sts: list[Any] = field(default_factory=list)  # STS TSVs: lang1 lang2 sentence1 sentence2 score


@dataclass
class LanguageOverrides(Section):
    """``per_language.LANG``: stage settings for one language, merged over the shared sections
    (``with_language_overrides``); parsed here only to check their keys and types."""

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
    per_language: dict[str, LanguageOverrides] = field(default_factory=dict)
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
