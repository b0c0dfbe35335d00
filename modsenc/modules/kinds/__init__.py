"""The per-language module kinds, in one ordered registry.

``MODULE_KINDS`` maps each kind's name to its ``ModuleKind`` (``base.py``), in the order the kinds
are trained and loaded: ``vocab``, ``la``, ``se``, ``cla``, one folder each, as peft's tuners:
``KIND/kind.py`` (the module: create, load, save, switch, merge), ``KIND/config.py`` (its recipe
section and library config) and ``KIND/stage.py`` (how add-language trains it, ``ModuleKind.stage``).
The bundle format (``module_files``), the ``ModularBackbone``'s create/load/save/switch, export's
merge, both runtimes, add-language's recipe sections and stages all read it; a new kind is one
folder plus one ``register_kind`` line here (docs/design.md, "Module kinds"). The kind files
import torch, peft and adapters lazily, and their stages only when asked: this is imported by
``modsenc zoo list``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from modsenc.modules.kinds.base import ModuleKind, module_name
from modsenc.modules.kinds.cla.kind import AlignmentKind
from modsenc.modules.kinds.la.kind import LanguageAdapterKind
from modsenc.modules.kinds.se.kind import SentenceAdapterKind
from modsenc.modules.kinds.vocab.files import EMBEDDINGS_FILE, TOKENIZER_DIR
from modsenc.modules.kinds.vocab.kind import Vocabulary, VocabularyKind

__all__ = [
    "EMBEDDINGS_FILE",
    "MODULE_KINDS",
    "TOKENIZER_DIR",
    "ModuleKind",
    "Vocabulary",
    "kinds_by_library",
    "kinds_in",
    "module_kind",
    "module_name",
    "monolingual",
    "ordered",
    "register_kind",
    "unregister_kind",
]

MODULE_KINDS: dict[str, ModuleKind] = {}  # name -> kind, in the order they are trained and loaded


def register_kind(kind: ModuleKind) -> ModuleKind:
    """Add ``kind`` after the registered ones (its stage runs after theirs, its files load after)."""
    if kind.name in MODULE_KINDS:
        raise ValueError(f"module kind {kind.name!r} is registered already")
    MODULE_KINDS[kind.name] = kind
    return kind


def unregister_kind(name: str) -> None:
    """Drop a registered kind (a test's own kind, after the test)."""
    MODULE_KINDS.pop(name, None)


register_kind(VocabularyKind())
register_kind(LanguageAdapterKind())
register_kind(SentenceAdapterKind())
register_kind(AlignmentKind())


def module_kind(name: str) -> ModuleKind:
    try:
        return MODULE_KINDS[name]
    except KeyError:
        raise ValueError(f"unknown module kind {name!r}; kinds are {', '.join(MODULE_KINDS)}") from None


def ordered(names: Iterable[str]) -> list[ModuleKind]:
    """The kinds named in ``names``, in registry order (an unknown name is an error)."""
    wanted = set(names)
    for name in wanted:
        module_kind(name)
    return [kind for name, kind in MODULE_KINDS.items() if name in wanted]


def kinds_in(folder: str | os.PathLike) -> list[str]:
    """The kinds saved in ``folder`` (a bundle or a stage's module folder), in registry order."""
    return [name for name, kind in MODULE_KINDS.items() if kind.saved_in(Path(folder))]


def kinds_by_library() -> dict[str, list[ModuleKind]]:
    """The kinds grouped by the library that switches them, in registry order."""
    groups: dict[str, list[ModuleKind]] = {}
    for kind in MODULE_KINDS.values():
        groups.setdefault(kind.library, []).append(kind)
    return groups


def monolingual(names: Iterable[str]) -> set[str]:
    """``names`` without the cross-lingual kinds (``ModuleKind.crosslingual``: the CLA)."""
    return {kind.name for kind in ordered(names) if not kind.crosslingual}
