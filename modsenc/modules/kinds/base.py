"""The interface every per-language module kind implements (``ModuleKind``).

A kind is one way of specialising the frozen backbone for a language: its own vocabulary, a LoRA,
a bottleneck adapter. ``ModularBackbone`` (``ModuleHost`` to the kinds) keeps the state (which
languages have which modules, the peft wrapper, the embedding matrices) and asks the kind, through
the registry in ``modsenc.modules.kinds``, how to create, load, save, remove, switch, count and
merge its modules.
The bundle format (``module_files``), the trainer's stages, export and both runtimes read the same
registry, so a kind's name, files and behaviour are written once, in its own folder
(``KIND/kind.py``; its settings and add-language stage beside it, ``KIND/config.py`` and
``KIND/stage.py``, reached through ``stage()``).

Kind files import torch, peft and adapters inside their methods: the registry is imported by
``modsenc zoo list``, which must not pay for them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from modsenc.modules.manifest import BundleIntegrityError

if TYPE_CHECKING:
    import torch
    from peft import PeftModel
    from torch import nn
    from transformers import PreTrainedModel

    from modsenc.backbone.encoder import Backbone
    from modsenc.modules.kinds.stage import StageRecipe


class ModuleHost(Protocol):
    """What a kind reads and writes of ``modsenc.modules.modular.ModularBackbone`` (named here, not
    imported: the kinds sit below it, and the import-linter contracts check that no kind reaches
    another through it)."""

    backbone: Backbone
    base_tokenizer: Any
    base_embeddings: nn.Embedding
    language_embeddings: nn.ModuleDict
    tokenizers: dict[str, Any]

    @property
    def peft(self) -> PeftModel | None: ...

    def attach_peft(self, model: PeftModel) -> None: ...

    def mark_loaded(self, lang: str, kind: str) -> None: ...


def module_name(lang: str, kind: str) -> str:
    """Adapter names inside the libraries: ``uz_la``, ``uz_se``, ``uz_cla``.

    No dots: peft keys adapters in ModuleDicts.
    """
    return f"{lang}_{kind}"


class ModuleKind(ABC):
    """One kind of per-language module. Subclasses set the class attributes and the methods that
    differ; the registry (``register_kind``) holds one instance per kind, in training order."""

    name: ClassVar[str]
    """The kind's name: the manifest's ``modules`` key, the add-language stage that trains it and
    its ``--stages`` name, the recipe section of its settings."""
    files: ClassVar[tuple[str, ...]]
    """Where its files lie in a bundle (or a stage's module folder); the first one marks it present."""
    library: ClassVar[str]
    """The library whose switch turns it on and off: kinds of one library are switched together
    (peft adds every active LoRA's delta, so the LA and the SE are set in one call)."""
    crosslingual: ClassVar[bool] = False
    """True for a module that maps the language onto the pivot's space: a pivot has none, and
    monolingual encoding (``mode="mono"``, the trainer's monolingual dev metrics) leaves it out."""
    export_note: ClassVar[str] = ""
    """What ``modsenc export``'s model card says about how the kind was merged (empty: nothing)."""

    # ----------------------------------------------------------------- training
    def stage(self) -> StageRecipe | None:
        """How ``add-language`` trains this kind: its folder's ``stage.py``'s ``STAGE``, imported
        here when asked (it imports torch and the objectives; the registry must not). None: a kind
        add-language does not train."""
        return None

    # ----------------------------------------------------------------- files
    def saved_in(self, folder: str | Path) -> bool:
        return (Path(folder) / self.files[0]).exists()

    def check_loadable(self, source: Path, lang: str) -> None:
        """Refuse an adapter folder without safetensors weights: a pickle (adapter_model.bin) can
        run code when loaded, so modsenc reads adapters only from safetensors."""
        if not list(source.glob("*.safetensors")):
            found = sorted(p.name for p in source.iterdir()) if source.is_dir() else []
            raise BundleIntegrityError(
                f"{source}: no *.safetensors weights (found: {', '.join(found) or 'nothing'}"
                "); modsenc loads adapters only from safetensors, never from pickles: rebuild the "
                f"bundle with `modsenc add-language {lang}`"
            )

    # ----------------------------------------------------------------- life cycle
    @abstractmethod
    def create(self, modular: ModuleHost, lang: str, config: Any) -> None:
        """Add a new (untrained) module of this kind for ``lang``, built from its library's config."""

    @abstractmethod
    def load(self, modular: ModuleHost, lang: str, directory: Path) -> None:
        """Load ``lang``'s module from ``directory`` (a bundle or a stage's module folder)."""

    @abstractmethod
    def save(self, modular: ModuleHost, lang: str, directory: Path) -> None:
        """Write ``lang``'s module into ``directory``, laid out as in a bundle (``files``)."""

    @abstractmethod
    def remove(self, modular: ModuleHost, lang: str) -> None:
        """Drop ``lang``'s module, if loaded (it is not active: ``ModularBackbone`` switched off first)."""

    @abstractmethod
    def activate(self, modular: ModuleHost, lang: str | None, active: Sequence[str]) -> None:
        """Switch this kind's library to ``lang``'s modules of the kinds ``active`` (the wanted kinds
        of this library, in registry order; empty: all of the library's modules off). Called once
        per library, on its first registered kind."""

    # ----------------------------------------------------------------- weights
    def parameters(self, modular: ModuleHost, lang: str) -> list[nn.Parameter]:
        """``lang``'s weights of this kind: the backbone's parameters under its adapter name."""
        marker = f".{module_name(lang, self.name)}."
        return [p for n, p in modular.backbone.named_parameters() if marker in f".{n}."]

    def tokenizer(self, modular: ModuleHost, lang: str) -> Any | None:
        """The tokenizer ``lang``'s text goes through when this module is active (None: not its concern)."""
        return None

    def embeddings(self, modular: ModuleHost, lang: str) -> nn.Embedding | None:
        """The word embeddings ``lang``'s text goes through when it is active (None: not its concern)."""
        return None

    def manifest_entry(self, modular: ModuleHost, lang: str) -> dict[str, Any]:
        """What the manifest's ``modules`` entry adds to path, parameters and percent of the backbone."""
        return {}

    # ----------------------------------------------------------------- merging (export, runtimes)
    def merge_weights(self, modular: ModuleHost, lang: str, state: dict[str, torch.Tensor]) -> None:
        """Add the module's effect to ``state``, a copy of the active backbone's weights under plain
        parameter names (``export.merged_model``). Nothing, for a kind whose effect is already in
        the active model's weights or is merged structurally (``merge_into``)."""
        return  # the default: nothing to add

    def merge_into(self, plain: PreTrainedModel, modular: ModuleHost, lang: str, widen: bool) -> None:
        """Fold the module into ``plain``, the plain model built from the merged weights, in place.
        ``widen``: exactly into the existing layers' shapes (export); otherwise the module may run
        beside them (the OpenVINO runtime's graph). Nothing, for a kind merged by ``merge_weights``."""
        return  # the default: nothing to fold
