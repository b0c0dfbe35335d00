"""The modsenc manifest written next to a backbone's weights, its fingerprint, and their check.

Format 3 (written now): the fingerprint hashes the weights' tensors (names, dtypes, shapes, bytes),
every other file of the folder (``config.json`` with the max length and layer count, every
tokenizer file with its normalisation) and the manifest's own fields that shape a vector
(``VECTOR_FIELDS``: the pooling and the prefix glued onto every text). So a bundle refuses a
backbone it was not built on, and an edited file or field is caught; the manifest also lists
every file's sha256 (``file_sha256``), so a damaged file is named. Format 2 did not cover the
manifest's fields, format 1 (older modsenc) only the weights and the vocabulary files; such a
backbone still loads, verified as far as its fingerprint reaches (import or train it again to
cover the rest).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from modsenc.utils.errors import IntegrityError
from modsenc.utils.io import file_sha256
from modsenc.utils.outputs import BACKBONE_MANIFEST, HASHES_KEY, confined

MANIFEST_NAME = BACKBONE_MANIFEST
FORMAT = "modsenc-backbone/3"
SUPPORTED_FORMATS = ("modsenc-backbone/1", "modsenc-backbone/2", FORMAT)
VECTOR_FIELDS = ("pooling", "prefix")  # manifest fields that change every vector (format 3 hashes them)
_V1_TOKENIZER_FILES = ("tokenizer.json", "sentencepiece.bpe.model", "vocab.txt")
_VERSIONED = ("modsenc", "torch", "transformers", "tokenizers", "sentencepiece", "safetensors", "deepfocus")


class BackboneIntegrityError(IntegrityError):
    """A backbone file is missing, altered, truncated, or its manifest is unusable (one line)."""


def _hash_weights(digest: Any, weights: Path) -> None:
    # Here, not at the top: reading a manifest (`zoo list`, `zoo info`) must not pay for torch.
    import torch  # noqa: PLC0415
    from safetensors import safe_open  # noqa: PLC0415

    try:
        with safe_open(weights, framework="pt") as f:
            for name in sorted(f.keys()):
                tensor = f.get_tensor(name).contiguous()
                digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
                digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
    except Exception as err:  # safetensors raises its own errors for truncated headers and data
        reason = " ".join(str(err).split())[:160]
        raise BackboneIntegrityError(
            f"{weights}: cannot be read as safetensors ({reason}); the file is truncated or damaged: "
            "copy or import the backbone again"
        ) from err


def format_version(manifest: dict[str, Any]) -> int:
    return int(manifest.get("format", SUPPORTED_FORMATS[0]).rsplit("/", 1)[1])


def fingerprint(
    model_dir: str | os.PathLike, version: int | None = None, fields: dict[str, Any] | None = None
) -> str:
    """sha256 over every safetensors tensor, (format >= 2) every other file of a model directory but
    the modsenc manifest (format 1: only the vocabulary files besides the weights) and (format 3)
    the manifest's ``VECTOR_FIELDS`` taken from ``fields``. With no ``version``, the folder as its
    own manifest describes it (its format and fields), or a folder without one as format 3 would."""
    model_dir = Path(model_dir)
    if version is None:
        manifest_path = model_dir / MANIFEST_NAME
        manifest = read_backbone_manifest(model_dir) if manifest_path.is_file() else {"format": FORMAT}
        version, fields = format_version(manifest), manifest
    digest = hashlib.sha256()
    weight_files = sorted(model_dir.glob("*.safetensors"))
    if not weight_files:
        raise FileNotFoundError(f"no *.safetensors weights in {model_dir}")
    for weights in weight_files:
        _hash_weights(digest, weights)
    if version == 1:
        others = [model_dir / name for name in _V1_TOKENIZER_FILES]
    else:
        others = sorted(
            p for p in model_dir.iterdir() if p.suffix != ".safetensors" and p.name != MANIFEST_NAME
        )
    for path in others:
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    if version >= 3:
        shaping = {name: (fields or {}).get(name) for name in VECTOR_FIELDS}
        digest.update(json.dumps(shaping, sort_keys=True, ensure_ascii=True).encode())
    return digest.hexdigest()


def read_backbone_manifest(backbone_dir: str | os.PathLike) -> dict[str, Any]:
    """The manifest of a modsenc backbone, or a one-line error naming the file."""
    path = Path(backbone_dir) / MANIFEST_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: {backbone_dir} is not a modsenc backbone (write one with "
            "`modsenc train-backbone` or `modsenc import-backbone`)"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BackboneIntegrityError(f"{path} is not valid JSON ({err}); the backbone is damaged") from err
    if not isinstance(manifest, dict) or not isinstance(manifest.get("fingerprint"), str):
        raise BackboneIntegrityError(
            f"{path} is not a backbone manifest (no 'fingerprint'); the backbone is damaged"
        )
    if manifest.get("format", SUPPORTED_FORMATS[0]) not in SUPPORTED_FORMATS:
        raise BackboneIntegrityError(
            f"{path}: unknown format {manifest.get('format')!r}; this modsenc reads "
            f"{', '.join(SUPPORTED_FORMATS)} (a newer modsenc wrote it?)"
        )
    return manifest


def verify_backbone(backbone_dir: str | os.PathLike) -> dict[str, Any]:
    """Check a backbone's files against its manifest: each listed file's sha256, then the
    fingerprint. Raises BackboneIntegrityError naming what differs; returns the manifest."""
    backbone_dir = Path(backbone_dir)
    manifest = read_backbone_manifest(backbone_dir)
    version = format_version(manifest)
    if version >= 2:
        hashes = manifest.get(HASHES_KEY)
        if not isinstance(hashes, dict) or not hashes:
            raise BackboneIntegrityError(
                f"{backbone_dir / MANIFEST_NAME} lists no file hashes ({HASHES_KEY}); its files cannot be "
                "verified: import or train the backbone again, or pass --no-verify"
            )
        for name, expected in sorted(hashes.items()):
            if not confined(name):
                raise BackboneIntegrityError(
                    f"{backbone_dir / MANIFEST_NAME}: {HASHES_KEY} names {name!r}, a path outside the "
                    "backbone; import or train the backbone again"
                )
            path = backbone_dir / name
            if not path.is_file():
                raise BackboneIntegrityError(f"{path} is missing from the backbone")
            if file_sha256(path) != expected:
                raise BackboneIntegrityError(
                    f"{path} is damaged or was edited (its sha256 differs from the one in {MANIFEST_NAME})"
                )
    if fingerprint(backbone_dir, version, manifest) != manifest["fingerprint"]:
        covered = "weights, config or tokenizer" + (", pooling or prefix" if version >= 3 else "")
        raise BackboneIntegrityError(
            f"{backbone_dir}: {covered} do not match the manifest's fingerprint (an edited or corrupt copy)"
        )
    return manifest


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for dist in _VERSIONED:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def build_manifest(
    model_dir: str | os.PathLike,
    attention: str,
    pooling: str = "cls",
    prefix: str = "",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "fingerprint": fingerprint(model_dir, 3, {"pooling": pooling, "prefix": prefix}),
        "pooling": pooling,
        "prefix": prefix,
        "attention": attention,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": library_versions(),
    }
    manifest.update(extra or {})
    return manifest
