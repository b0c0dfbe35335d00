"""The modsenc manifest written next to a backbone's weights, and its fingerprint.

The fingerprint hashes the weights' tensors (names, dtypes, shapes, bytes) and the
tokenizer's vocabulary files, so a language module can refuse a backbone it was not built on.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import time
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

MANIFEST_NAME = "modsenc_backbone.json"
_TOKENIZER_FILES = ("tokenizer.json", "sentencepiece.bpe.model", "vocab.txt")
_VERSIONED = ("modsenc", "torch", "transformers", "tokenizers", "sentencepiece", "safetensors", "deepfocus")


def fingerprint(model_dir: str | os.PathLike) -> str:
    """sha256 over every safetensors tensor and the tokenizer files of a model directory."""
    model_dir = Path(model_dir)
    digest = hashlib.sha256()
    weight_files = sorted(model_dir.glob("*.safetensors"))
    if not weight_files:
        raise FileNotFoundError(f"no *.safetensors weights in {model_dir}")
    for weights in weight_files:
        with safe_open(weights, framework="pt") as f:
            for name in sorted(f.keys()):
                tensor = f.get_tensor(name).contiguous()
                digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
                digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
    for name in _TOKENIZER_FILES:
        path = model_dir / name
        if path.exists():
            digest.update(name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


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
        "format": "modsenc-backbone/1",
        "fingerprint": fingerprint(model_dir),
        "pooling": pooling,
        "prefix": prefix,
        "attention": attention,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": library_versions(),
    }
    manifest.update(extra or {})
    return manifest
