"""The backbone: a packed transformer encoder, its manifest, attention backends and imports.

The names below are loaded on first use (PEP 562): importing a submodule that needs no torch
(``modsenc.backbone.manifest``, ``.cache``; ``zoo list`` reads a zoo through them) must not pull in
torch and transformers through this package's ``__init__``.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "MANIFEST_NAME": "modsenc.backbone.manifest",
    "Backbone": "modsenc.backbone.encoder",
    "PackedBatch": "modsenc.backbone.packing",
    "available_backends": "modsenc.backbone.attention",
    "fingerprint": "modsenc.backbone.manifest",
    "get_attention_backend": "modsenc.backbone.attention",
    "load_manifest": "modsenc.backbone.encoder",
    "packed_layer_forward": "modsenc.backbone.encoder",
    "run_packed_layers": "modsenc.backbone.encoder",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'modsenc.backbone' has no attribute {name!r}")
