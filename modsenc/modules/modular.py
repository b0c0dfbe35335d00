"""A frozen backbone plus per-language modules that can be switched per batch.

Per language ``xx`` there can be one module of each registered kind (``modsenc.modules.kinds``):
``vocab`` (its own tokenizer and embeddings), ``la`` and ``se`` (peft LoRAs named ``xx_la`` and
``xx_se``, their deltas added), ``cla`` (an adapters parallel bottleneck named ``xx_cla``). This
class holds the state (which modules are loaded, the peft wrapper, the embedding matrices); each
kind says how its modules are created, loaded, saved, switched, counted and merged.

``adapters.init`` runs first, on the raw Hugging Face model: it wraps plain ``nn.Linear`` layers,
and peft then wraps those in turn. Both libraries' layers are called from the backbone's packed
forward (``query``/``key``/``value`` and the ``output`` modules), so the modules work on every
attention backend.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import adapters
import torch
from adapters import ParBnConfig
from peft import LoraConfig, PeftModel
from torch import nn

from modsenc.backbone.encoder import Backbone, Tokenized, load_manifest, tokenize_texts
from modsenc.backbone.manifest import library_versions
from modsenc.data.orthography import Orthography, get_orthography
from modsenc.modules.bundle import BundleIntegrityError, Zoo, verify_bundle
from modsenc.modules.kinds import (
    MODULE_KINDS,
    Vocabulary,
    kinds_by_library,
    kinds_in,
    module_kind,
    module_name,
    ordered,
)
from modsenc.modules.licences import bundle_licence
from modsenc.modules.manifest import BundleManifest

_State = tuple[str | None, tuple[str, ...]]  # a language (None: the bare backbone) and its modules
__all__ = ["ModularBackbone", "module_library_versions", "module_name"]

MODULE_LIBRARIES = ("peft", "adapters", "sentence-transformers")  # their versions go into manifests


class _NoInactiveAdapterWarning(logging.Filter):
    # adapters warns on every forward of a language that has no CLA (the pivot, or mode="mono"):
    # that is the intended state here, not a mistake.
    def filter(self, record: logging.LogRecord) -> bool:
        return "none are activated" not in record.getMessage()


logging.getLogger("adapters.model_mixin").addFilter(_NoInactiveAdapterWarning())


class ModularBackbone(nn.Module):
    def __init__(self, backbone: Backbone) -> None:
        super().__init__()
        backbone.requires_grad_(False)
        adapters.init(backbone.model)
        self.backbone = backbone
        self.base_tokenizer = backbone.tokenizer
        self.base_embeddings = backbone.word_embeddings
        self.language_embeddings = nn.ModuleDict()
        self.tokenizers: dict[str, Any] = {}
        self.orthographies: dict[str, Orthography] = {}
        self.loaded: dict[str, set[str]] = {}
        self._in_force: tuple[str, tuple[str, ...]] | None = None  # what the layers hold now
        self._selected: _State | None = None  # select()'s, put back when an active block ends
        self._blocks: list[_State] = []  # the open active blocks' states, innermost last
        # Held outside the module tree: PeftModel wraps ``backbone`` itself, so registering it would
        # list every backbone weight twice in state_dict().
        self.__dict__["peft"] = None
        # One forward at a time: activating a language mutates shared layers.
        self.lock = threading.RLock()

    @property
    def peft(self) -> PeftModel | None:
        return self.__dict__["peft"]

    def attach_peft(self, model: PeftModel) -> None:
        """The PeftModel that wraps ``backbone`` (created by the first LoRA kind's module)."""
        self.__dict__["peft"] = model

    # ----------------------------------------------------------------- adding modules
    def mark_loaded(self, lang: str, kind: str) -> None:
        """Record that ``lang`` has a ``kind`` module (its kind calls this once it is in place)."""
        self.loaded.setdefault(lang, set()).add(kind)
        self._in_force = None

    def set_orthography(self, lang: str, orthography: Orthography) -> None:
        """Normalise ``lang``'s text this way before its tokenizer (takes effect on activation)."""
        self.orthographies[lang] = orthography
        self._in_force = None

    def add_module(self, lang: str, kind: str, config: Any) -> None:
        """A new (untrained) ``kind`` module for ``lang`` from its library's config (for ``vocab``,
        a ``Vocabulary``: tokenizer and embeddings)."""
        module_kind(kind).create(self, lang, config)

    def add_vocabulary(self, lang: str, tokenizer: Any, weight: torch.Tensor) -> nn.Embedding:
        self.add_module(lang, "vocab", Vocabulary(tokenizer, weight))
        return self.language_embeddings[lang]

    def add_lora(self, lang: str, kind: str, config: LoraConfig) -> None:
        """A LoRA kind's module (``la``, ``se``): ``add_module`` with peft's config."""
        self.add_module(lang, kind, config)

    def add_alignment(self, lang: str, config: ParBnConfig) -> None:
        self.add_module(lang, "cla", config)

    def save_vocabulary(self, lang: str, directory: str | Path) -> None:
        """``tokenizer/`` and ``embeddings.safetensors`` of ``lang`` into ``directory``."""
        module_kind("vocab").save(self, lang, Path(directory))

    def save_lora(self, lang: str, kind: str, path: str | Path) -> None:
        """``adapter_config.json`` + ``adapter_model.safetensors`` in ``path`` (peft's format)."""
        self._save_as(lang, kind, Path(path))

    def save_alignment(self, lang: str, path: str | Path) -> None:
        """adapters' format: ``adapter_config.json`` + ``adapter.safetensors``."""
        self._save_as(lang, "cla", Path(path))

    def _save_as(self, lang: str, kind: str, path: Path) -> None:
        """A one-folder module saved at ``path``, whatever its name (its kind writes the folder
        under the bundle's name for it, in a given directory)."""
        folder_name = module_kind(kind).files[0]
        if path.name == folder_name:
            module_kind(kind).save(self, lang, path.parent)
            return
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            module_kind(kind).save(self, lang, Path(tmp))
            shutil.move(str(Path(tmp) / folder_name), str(path))

    def load_bundle(
        self,
        bundle_dir: str | Path,
        lang: str,
        kinds: Iterable[str] | None = None,
        verify: bool = True,
    ) -> set[str]:
        """Load a bundle's modules (all, or ``kinds``); on any error nothing of ``lang`` stays loaded.

        ``verify`` checks every file against the manifest's sha256 first (``verify_bundle``);
        whatever ``verify`` says, a file that cannot be read or loads non-finite weights is a
        BundleIntegrityError naming it.
        """
        bundle_dir = Path(bundle_dir)
        manifest = BundleManifest.read(bundle_dir, lang)
        if verify:
            verify_bundle(bundle_dir, manifest)
        wanted = [k for k in MODULE_KINDS if k in manifest.modules and (kinds is None or k in set(kinds))]
        if lang in self.loaded:
            self.remove_language(lang)
        try:
            self.set_orthography(lang, get_orthography(manifest.orthography_name))
            for kind in wanted:
                source = bundle_dir / module_kind(kind).files[0]
                module_kind(kind).check_loadable(source, lang)
                try:
                    self.load_module(lang, kind, bundle_dir)
                except Exception as err:
                    reason = " ".join(str(err).split())[:200]  # one line, whatever the library said
                    raise BundleIntegrityError(
                        f"{source}: cannot be loaded ({type(err).__name__}: {reason}); the bundle "
                        "is damaged or was not written by modsenc: rebuild it with "
                        f"`modsenc add-language {lang}`"
                    ) from err
                if not all(torch.isfinite(p).all() for p in self.module_parameters(lang, kind)):
                    raise BundleIntegrityError(
                        f"{source}: holds NaN or infinite weights; rebuild the bundle with "
                        f"`modsenc add-language {lang}`"
                    )
        except Exception:
            with contextlib.suppress(Exception):
                self.remove_language(lang)
            raise
        return set(wanted)

    def save_bundle(
        self,
        zoo: Zoo,
        lang: str,
        module_dirs: Sequence[str | Path],
        *,
        pivot: str,
        stages: Sequence[str],
        script: str,
        router: dict[str, Any],
        router_files: Mapping[str, str | Path],
        record: Mapping[str, Any],
        extra_files: Mapping[str, str | Path] | None = None,
    ) -> Path:
        """Install ``lang``'s loaded modules in ``zoo`` as one bundle (atomically); returns its folder.

        ``module_dirs``: folders the modules were saved into with ``save_module`` (a training
        stage's outputs, in order: a later folder's copy of a module wins, as the LA's trained
        embeddings win over the vocabulary stage's). Their files are copied as they are, so the
        bundle holds exactly what the stages wrote. ``router`` is the manifest's router section and
        ``router_files`` its files (bundle-relative name -> file), ``extra_files`` other files the
        bundle carries (the int8 calibration sentences, ``CALIBRATION_FILE``); ``record`` holds the
        ``BundleManifest`` fields that describe the training (precision, data, training config,
        metrics, timings, ...). The manifest's other fields and ``file_sha256`` (see
        ``Zoo.write_bundle``) come from here.
        """
        files = self._bundle_files(lang, module_dirs)
        files.update({name: Path(path) for name, path in {**router_files, **(extra_files or {})}.items()})
        backbone_params = self.backbone_parameter_count()
        orthography = self.orthographies.get(lang) or get_orthography("none")
        filled = {"language", "pivot", "is_pivot", "stages", "script", "router", "orthography"}
        filled |= {"format", "backbone", "modules", "versions", "created", "licence", "file_sha256"}
        refused = sorted(set(record) & filled) + sorted(set(record) - BundleManifest.field_names())
        if refused:
            raise ValueError(f"record: {refused} are not training fields of a bundle manifest")
        manifest = BundleManifest(
            router=router,
            language=lang,
            script=script,
            orthography=orthography.to_manifest(),
            pivot=pivot,
            is_pivot=lang == pivot,
            backbone={"fingerprint": zoo.backbone_fingerprint(), "parameters": backbone_params},
            modules=self._module_sizes(lang, backbone_params),
            stages=list(stages),
            versions=library_versions() | module_library_versions(),
            created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            licence=bundle_licence(_backbone_source(zoo), record.get("data") or {}),
            **record,
        )
        return zoo.write_bundle(lang, files, manifest)

    def _bundle_files(self, lang: str, module_dirs: Sequence[str | Path]) -> dict[str, Path]:
        """Bundle-relative name -> saved file or folder of each loaded module of ``lang``."""
        files: dict[str, Path] = {}
        for folder in map(Path, module_dirs):
            for kind in kinds_in(folder):
                files.update({name: folder / name for name in module_kind(kind).files})
        loaded = self.modules_of(lang)
        missing = [k for k in sorted(loaded) if not all(name in files for name in module_kind(k).files)]
        if missing:
            raise FileNotFoundError(
                f"the {lang} modules {missing} are loaded but not saved in {[str(d) for d in module_dirs]}"
            )
        return files

    def _module_sizes(self, lang: str, backbone_params: int) -> dict[str, dict[str, Any]]:
        """The manifest's ``modules``: each loaded module's path and size (the vocabulary's too)."""
        modules: dict[str, dict[str, Any]] = {}
        for kind in sorted(self.modules_of(lang)):
            count = self.parameter_count(lang, kind)
            modules[kind] = {
                "path": module_kind(kind).files[0],
                "parameters": count,
                "percent_of_backbone": round(100 * count / backbone_params, 3),
                **module_kind(kind).manifest_entry(self, lang),
            }
        return modules

    def save_module(self, lang: str, kind: str, directory: str | Path) -> None:
        """Write one of ``lang``'s modules into ``directory``, laid out as in a bundle."""
        directory = Path(directory)
        if kind not in self.modules_of(lang):
            raise KeyError(f"language {lang!r} has no {kind!r} module loaded")
        directory.mkdir(parents=True, exist_ok=True)
        module_kind(kind).save(self, lang, directory)

    def load_module(self, lang: str, kind: str, directory: str | Path) -> None:
        """Load one module of ``lang`` from ``directory`` (a bundle or a stage's module folder)."""
        module_kind(kind).load(self, lang, Path(directory))

    def remove_language(self, lang: str) -> None:
        """Drop every module of ``lang`` (frees its memory)."""
        self.loaded.pop(lang, None)
        self._in_force = None
        if self._selected is not None and self._selected[0] == lang:
            self._selected = None
        self._activate(None)  # peft refuses to delete an active adapter
        for kind in MODULE_KINDS.values():
            kind.remove(self, lang)
        self.orthographies.pop(lang, None)

    # ----------------------------------------------------------------- switching
    def modules_of(self, lang: str) -> set[str]:
        return set(self.loaded.get(lang, set()))

    def _wanted(self, lang: str | None, kinds: Iterable[str] | None) -> set[str]:
        """``kinds`` (default: all of ``lang``'s loaded modules), checked to be loaded."""
        available = self.modules_of(lang) if lang else set()
        wanted = available if kinds is None else set(kinds)
        unknown = wanted - set(MODULE_KINDS)
        if unknown:
            raise ValueError(f"unknown module kinds {sorted(unknown)}; choose from {tuple(MODULE_KINDS)}")
        missing = wanted - available
        if missing:
            raise KeyError(
                f"language {lang!r} has no {sorted(missing)} module loaded (loaded: {sorted(available)})"
            )
        return wanted

    def select(self, lang: str | None, kinds: Iterable[str] | None = None) -> None:
        """``lang``'s modules (all loaded, or ``kinds``) for every forward pass until the next
        ``select`` (training stages hand ``self.backbone`` to objectives); ``active`` blocks keep it."""
        with self.lock:
            wanted = self._wanted(lang, kinds)
            self._activate(lang, wanted)
            self._selected = (lang, tuple(sorted(wanted)))

    @contextlib.contextmanager
    def active(self, lang: str | None, kinds: Iterable[str] | None = None) -> Iterator[None]:
        """``lang``'s modules (all loaded, or ``kinds``; None: none) for the block, under the lock;
        then the enclosing block's or ``select``'s state again (with neither, the layers stay)."""
        with self.lock:
            wanted = self._wanted(lang, kinds)
            self._activate(lang, wanted)
            self._blocks.append((lang, tuple(sorted(wanted))))
            try:
                yield
            finally:
                self._blocks.pop()
                outer = self._blocks[-1] if self._blocks else self._selected
                if outer is not None:
                    self._activate(*outer)

    def _activate(self, lang: str | None, kinds: Iterable[str] | None = None) -> None:
        """Route the next forward passes through ``lang``'s modules (all loaded ones, or ``kinds``).

        ``lang=None`` (or no modules) runs the bare backbone. This switches weights: the input
        embeddings, the LoRAs and the CLA: each library's kinds through their first kind's
        ``activate``, in registry order. It switches weights only: text goes through
        ``tokenize(lang, texts, kinds)``, which names its language, so the backbone's own
        ``tokenizer`` and ``normalize_text`` stay the base model's whatever is active. Private:
        callers say how long a state holds, with ``active`` (a block) or ``select`` (until the next
        one)."""
        wanted = self._wanted(lang, kinds)
        key = (lang or "", tuple(sorted(wanted)))
        if key == self._in_force:
            return
        for kinds_of_library in kinds_by_library().values():
            active = [kind.name for kind in kinds_of_library if kind.name in wanted]
            kinds_of_library[0].activate(self, lang, active)
        self._in_force = key

    # ----------------------------------------------------------------- text of a language
    def tokenizer_of(self, lang: str | None, kinds: Iterable[str] | None = None) -> Any:
        """The tokenizer ``lang``'s text goes through with ``kinds``: its own vocabulary's when the
        vocab module is among them (the first kind that has one), else the backbone's."""
        found = (kind.tokenizer(self, lang) for kind in ordered(self._wanted(lang, kinds)))
        return next((t for t in found if t is not None), self.base_tokenizer)

    def embeddings_of(self, lang: str | None, kinds: Iterable[str] | None = None) -> nn.Embedding:
        """The word embeddings ``lang``'s text goes through with ``kinds``: its own vocabulary's when
        the vocab module is among them, else the backbone's."""
        found = (kind.embeddings(self, lang) for kind in ordered(self._wanted(lang, kinds)))
        return next((e for e in found if e is not None), self.base_embeddings)

    def normalizer_of(self, lang: str | None) -> Callable[[str], str] | None:
        """``lang``'s orthography (e.g. Uzbek apostrophes and Cyrillic), or None."""
        orthography = self.orthographies.get(lang) if lang else None
        return orthography.normalize if orthography is not None and orthography.name != "none" else None

    def tokenized(
        self,
        lang: str | None,
        texts: Sequence[str],
        kinds: Iterable[str] | None = None,
        max_length: int | None = None,
        prefix: str | None = None,
    ) -> Tokenized:
        """Token ids of ``texts`` as ``lang``'s modules (``kinds``; default all loaded) see them:
        the language's orthography, the prefix (``prefix``, default the backbone's: e5's
        ``query: ``), the language's tokenizer, cut to ``max_length`` (default and at most the
        backbone's). ``encode`` feeds the model exactly these, so a token count taken here is the
        count the model ran on."""
        backbone = self.backbone
        limit = min(max_length or backbone.max_length, backbone.max_length)
        tokenizer = self.tokenizer_of(lang, kinds)
        prefix = backbone.prefix if prefix is None else prefix
        return tokenize_texts(tokenizer, texts, limit, prefix, self.normalizer_of(lang))

    def tokenize(
        self,
        lang: str | None,
        texts: Sequence[str],
        kinds: Iterable[str] | None = None,
        max_length: int | None = None,
        warn_truncated: bool = False,
        prefix: str | None = None,
    ) -> list[list[int]]:
        """The ids of ``tokenized``, with a warning when some text was cut."""
        tokens = self.tokenized(lang, texts, kinds, max_length, prefix)
        if warn_truncated:
            tokens.warn_if_truncated(min(max_length or self.backbone.max_length, self.backbone.max_length))
        return tokens.ids

    def set_trainable(self, lang: str, kinds: Sequence[str]) -> list[nn.Parameter]:
        """Freeze everything, then unfreeze ``lang``'s ``kinds``; returns the trainable parameters."""
        self.requires_grad_(False)
        self.backbone.requires_grad_(False)
        params: list[nn.Parameter] = []
        for kind in kinds:
            params.extend(self.module_parameters(lang, kind))
        for p in params:
            p.requires_grad_(True)
        return params

    def module_parameters(self, lang: str, kind: str) -> list[nn.Parameter]:
        if kind not in self.modules_of(lang):
            raise KeyError(f"language {lang!r} has no {kind!r} module loaded")
        return module_kind(kind).parameters(self, lang)

    def parameter_count(self, lang: str, kind: str) -> int:
        return sum(p.numel() for p in self.module_parameters(lang, kind))

    def backbone_parameter_count(self) -> int:
        """Parameters of the bare backbone (its own embedding matrix included, modules excluded)."""
        modules = {
            id(p)
            for lang in self.loaded
            for kind in self.loaded[lang]
            for p in self.module_parameters(lang, kind)
        }
        own = {id(p): p for p in self.backbone.parameters() if id(p) not in modules}
        own.update({id(p): p for p in self.base_embeddings.parameters()})
        return sum(p.numel() for p in own.values())

    # ----------------------------------------------------------------- encoding
    def encode(
        self,
        sentences: str | Sequence[str],
        lang: str | None,
        kinds: Iterable[str] | None = None,
        prefix: str | None = None,
        **kwargs: Any,
    ):
        """Encode through ``lang``'s modules (sentence-transformers conventions, see ``Backbone.encode``),
        its text through ``tokenize(lang, ..., kinds, prefix=prefix)`` (None: the backbone's prefix)."""
        wanted = self._wanted(lang, kinds)

        def tokenize(texts: list[str]) -> list[list[int]]:
            return self.tokenize(lang, texts, wanted, warn_truncated=True, prefix=prefix)

        with self.active(lang, wanted):
            return self.backbone.encode(sentences, tokenize=tokenize, **kwargs)


def module_library_versions() -> dict[str, str]:
    """Versions of the libraries that define the modules' file formats."""
    return {name: importlib.metadata.version(name) for name in MODULE_LIBRARIES}


def _backbone_source(zoo: Zoo) -> dict[str, Any]:
    """The zoo backbone manifest's ``source`` (what its weights are), for a bundle's licence."""
    return dict(load_manifest(zoo.backbone_path()).get("source") or {})
