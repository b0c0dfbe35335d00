"""modsenc: modular multilingual sentence encoders."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["ModularEncoder", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy, so `import modsenc` (and `modsenc --help`) does not pull in torch.
    if name == "ModularEncoder":
        from modsenc.routing.encoder import ModularEncoder  # noqa: PLC0415

        return ModularEncoder
    raise AttributeError(f"module 'modsenc' has no attribute {name!r}")
