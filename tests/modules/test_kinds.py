"""The module-kinds seam (docs/design.md, "Module kinds"): one ordered registry that the bundle
format and add-language's stages read, kinds that import no heavy library at start-up, and a new
kind that reaches the bundle format through one ``register_kind`` call."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from modsenc.modules.bundle import module_files, module_kinds_in
from modsenc.modules.kinds import MODULE_KINDS, ModuleKind, module_kind, monolingual, ordered, register_kind
from modsenc.training.configs import STAGES, AddLanguageRecipe, LanguageOverrides
from modsenc.training.stages import STAGE_RECIPES


def test_the_registry_orders_the_kinds_and_the_bundle_format_keeps_its_files() -> None:
    assert list(MODULE_KINDS) == ["vocab", "la", "se", "cla"] and STAGES == tuple(MODULE_KINDS)
    # the bundle layout on disk is unchanged (adapters_zoo and every earlier bundle read as before)
    assert {name: module_files(name) for name in MODULE_KINDS} == {
        "vocab": ("embeddings.safetensors", "tokenizer"),
        "la": ("la",),
        "se": ("se",),
        "cla": ("cla",),
    }
    assert [kind.name for kind in ordered({"cla", "vocab", "se"})] == ["vocab", "se", "cla"]
    assert monolingual({"la", "se", "cla"}) == {"la", "se"}
    with pytest.raises(ValueError, match="unknown module kind 'xx'; kinds are vocab, la, se, cla"):
        module_kind("xx")


def test_every_kind_has_a_stage_recipe_and_a_recipe_section() -> None:
    assert list(STAGE_RECIPES) == list(MODULE_KINDS)
    sections = {f.name for f in dataclasses.fields(AddLanguageRecipe)}
    overrides = {f.name for f in dataclasses.fields(LanguageOverrides)}
    assert set(MODULE_KINDS) <= sections and set(MODULE_KINDS) == overrides


class _PrefixKind(ModuleKind):
    """A hypothetical kind: all it takes to appear in the bundle format is this and register_kind."""

    name: ClassVar[str] = "pt"
    files: ClassVar[tuple[str, ...]] = ("pt",)
    library: ClassVar[str] = "prefix"

    def create(self, modular, lang: str, config) -> None:
        modular.mark_loaded(lang, self.name)

    def load(self, modular, lang: str, directory: Path) -> None:
        modular.mark_loaded(lang, self.name)

    def save(self, modular, lang: str, directory: Path) -> None:
        (directory / self.files[0]).mkdir()

    def remove(self, modular, lang: str) -> None:
        return None

    def activate(self, modular, lang: str | None, active: Sequence[str]) -> None:
        return None


def test_a_registered_kind_reaches_the_bundle_format(tmp_path) -> None:
    register_kind(_PrefixKind())
    try:
        with pytest.raises(ValueError, match="'pt' is registered already"):
            register_kind(_PrefixKind())
        assert list(MODULE_KINDS)[-1] == "pt" and module_files("pt") == ("pt",)
        for name in ("cla", "pt", "la"):
            (tmp_path / name).mkdir()
        assert module_kinds_in(tmp_path) == ["la", "cla", "pt"]  # registry order, not the folder's
    finally:
        MODULE_KINDS.pop("pt", None)


def test_the_registry_imports_no_model_library() -> None:
    # `modsenc zoo list` reads the registry (through the bundle format) and must stay torch-free.
    code = (
        "import json, sys; import modsenc.modules.kinds, modsenc.modules.bundle; "
        "heavy = ('torch', 'peft', 'adapters', 'transformers'); "
        "print(json.dumps(sorted(m for m in heavy if m in sys.modules)))"
    )
    run = [sys.executable, "-c", code]
    done = subprocess.run(run, capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == []
