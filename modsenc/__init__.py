"""modsenc: modular multilingual sentence encoders."""

from __future__ import annotations

import logging
from typing import Any

__version__ = "0.1.0"

__all__ = ["ModularEncoder", "__version__"]


# Importing the library prints nothing: transformers imports torchao whenever it is installed,
# and torchao warns that its CUDA-only kernels do not load on a CPU build of torch (and torch's
# pytree that torchao registers enums the old way), through Python's last-resort handler since no
# logging is configured. Nothing a user can act on; a level the user set is left alone, and
# ``modsenc -v`` shows them (modsenc.utils.logs.IMPORT_NOISE).
for _noisy in ("torchao", "torch.utils._pytree"):
    if logging.getLogger(_noisy).level == logging.NOTSET:
        logging.getLogger(_noisy).setLevel(logging.ERROR)


def __getattr__(name: str) -> Any:
    # Lazy, so `import modsenc` (and `modsenc --help`) does not pull in torch.
    if name == "ModularEncoder":
        from modsenc.encoder import ModularEncoder  # noqa: PLC0415

        return ModularEncoder
    raise AttributeError(f"module 'modsenc' has no attribute {name!r}")
