"""The language zoo on disk: one backbone, one bundle per language, and an index.

    ZOO/index.json                 installed languages and the backbone's fingerprint
    ZOO/backbone/                  the backbone every bundle was built on (copied once, never rewritten)
    ZOO/LANG/modsenc_bundle.json   manifest: language, script, backbone fingerprint, module sizes,
                                   data files with hashes and counts, training config, dev metrics
    ZOO/LANG/tokenizer/            the language's tokenizer (if it has its own vocabulary)
    ZOO/LANG/embeddings.safetensors
    ZOO/LANG/{la,se}/              peft LoRA adapters (adapter_config.json + adapter_model.safetensors)
    ZOO/LANG/cla/                  adapters parallel bottleneck (adapter_config.json + adapter.safetensors)

Bundles are written with ``atomic_directory`` (a crash leaves the old bundle or the new one) and
the index under an exclusive file lock, so two ``add-language`` runs for different languages can
share a zoo.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from modsenc.backbone.encoder import load_manifest
from modsenc.backbone.manifest import MANIFEST_NAME, fingerprint
from modsenc.data.readers import is_language_code
from modsenc.utils.io import atomic_directory, atomic_write_json

BUNDLE_MANIFEST = "modsenc_bundle.json"
INDEX_NAME = "index.json"
BACKBONE_DIR = "backbone"
EMBEDDINGS_FILE = "embeddings.safetensors"
TOKENIZER_DIR = "tokenizer"

_SCRIPTS = {
    "LATIN": "Latn",
    "CYRILLIC": "Cyrl",
    "ARABIC": "Arab",
    "GREEK": "Grek",
    "HEBREW": "Hebr",
    "DEVANAGARI": "Deva",
    "CJK": "Hani",
    "HANGUL": "Hang",
    "HIRAGANA": "Jpan",
    "KATAKANA": "Jpan",
    "GEORGIAN": "Geor",
    "ARMENIAN": "Armn",
    "THAI": "Thai",
}


def check_language_code(code: str) -> str:
    """Codes name folders in the zoo, so only two lowercase letters pass (nothing path-like)."""
    if not isinstance(code, str) or not is_language_code(code):
        raise ValueError(f"invalid language code {code!r}: expected an ISO 639-1 code such as 'uz' or 'en'")
    return code


def detect_script(texts: Iterable[str], sample: int = 2000) -> str:
    """ISO 15924 code of the most frequent script among the letters of ``texts`` ("Zyyy" if none)."""
    counts: Counter[str] = Counter()
    for i, text in enumerate(texts):
        if i >= sample:
            break
        for ch in text:
            if ch.isalpha():
                first = unicodedata.name(ch, "UNKNOWN").split()[0]
                counts[_SCRIPTS.get(first, first.title())] += 1
    return counts.most_common(1)[0][0] if counts else "Zyyy"


class Zoo:
    """A folder of language bundles sharing one backbone."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    @property
    def index_path(self) -> Path:
        return self.root / INDEX_NAME

    @property
    def backbone_dir(self) -> Path:
        return self.root / BACKBONE_DIR

    def bundle_dir(self, lang: str) -> Path:
        return self.root / check_language_code(lang)

    # ----------------------------------------------------------------- index
    def read_index(self) -> dict[str, Any]:
        if not self.index_path.exists():
            return {"format": "modsenc-zoo/1", "backbone": None, "languages": {}}
        try:
            return json.loads(self.index_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{self.index_path} is not valid JSON ({err}); delete it and re-run `modsenc add-language`"
            ) from err

    def languages(self) -> list[str]:
        return sorted(self.read_index()["languages"])

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def backbone_fingerprint(self) -> str:
        return load_manifest(self.backbone_dir)["fingerprint"]

    def install_backbone(self, source: str | os.PathLike | None) -> Path:
        """Copy ``source`` in as the zoo's backbone on first use; afterwards only check it matches."""
        with self.locked():
            if self.backbone_dir.exists():
                if source is not None:
                    theirs = _backbone_fingerprint(Path(source))
                    if theirs != self.backbone_fingerprint():
                        raise ValueError(
                            f"{self.root} was built on another backbone (fingerprint "
                            f"{self.backbone_fingerprint()[:12]}, {source} has {theirs[:12]}); "
                            "use a new --zoo"
                        )
                return self.backbone_dir
            if source is None:
                raise FileNotFoundError(
                    f"{self.root} has no backbone yet: pass --backbone DIR (e.g. runs/demo/backbone) "
                    "the first time"
                )
            source = Path(source)
            if not (source / MANIFEST_NAME).exists():
                raise FileNotFoundError(
                    f"{source / MANIFEST_NAME} not found: --backbone must be a backbone written by "
                    "`modsenc train-backbone` (its manifest holds the fingerprint that bundles are "
                    "checked against)"
                )
            with atomic_directory(self.backbone_dir) as tmp:
                for item in source.iterdir():
                    if item.is_file():
                        shutil.copy2(item, tmp / item.name)
            index = self.read_index()
            index["backbone"] = {"fingerprint": self.backbone_fingerprint(), "source": str(source.resolve())}
            atomic_write_json(self.index_path, index)
            return self.backbone_dir

    def read_manifest(self, lang: str) -> dict[str, Any]:
        path = self.bundle_dir(lang) / BUNDLE_MANIFEST
        if not path.exists():
            installed = ", ".join(self.languages()) or "none"
            raise FileNotFoundError(
                f"no bundle for {lang!r} in {self.root} (installed: {installed}); "
                f"run `modsenc add-language {lang}`"
            )
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{path} is corrupt ({err}); rebuild the bundle with `modsenc add-language {lang}`"
            ) from err

    def read_compatible_manifest(self, lang: str) -> dict[str, Any]:
        """The bundle's manifest, after checking it was built on this zoo's backbone."""
        manifest = self.read_manifest(lang)
        if manifest.get("backbone", {}).get("fingerprint") != self.backbone_fingerprint():
            raise ValueError(
                f"the {lang} bundle in {self.root} was built for another backbone (fingerprint mismatch); "
                f"rebuild it with `modsenc add-language {lang}`"
            )
        return manifest

    def bundle_bytes(self, lang: str) -> int:
        """Size of a bundle on disk."""
        return sum(p.stat().st_size for p in self.bundle_dir(lang).rglob("*") if p.is_file())

    def write_bundle(self, lang: str, files: dict[str, Path], manifest: dict[str, Any]) -> Path:
        """Install a bundle atomically: ``files`` maps names inside the bundle to files or folders."""
        target = self.bundle_dir(lang)
        with self.locked():
            with atomic_directory(target) as tmp:
                for name, source in files.items():
                    if source.is_dir():
                        shutil.copytree(source, tmp / name)
                    else:
                        shutil.copy2(source, tmp / name)
                atomic_write_json(tmp / BUNDLE_MANIFEST, manifest)
            index = self.read_index()
            index["languages"][lang] = {
                "script": manifest.get("script"),
                "modules": sorted(manifest.get("modules", {})),
                "is_pivot": manifest.get("is_pivot", False),
                "created": manifest.get("created"),
            }
            atomic_write_json(self.index_path, index)
        return target


def _backbone_fingerprint(path: Path) -> str:
    manifest = path / MANIFEST_NAME
    if manifest.exists():
        return json.loads(manifest.read_text(encoding="utf-8"))["fingerprint"]
    return fingerprint(path)
