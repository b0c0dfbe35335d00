"""Where the language zoo is when no ``--zoo`` is given: one place for every command.

The default is ``adapters_zoo/`` relative to the working directory (in a checkout, the repository's
own ``adapters_zoo/``, whose README describes the format; trained bundles there are not tracked by
git), or the folder named by the environment variable ``MODSENC_ZOO`` when it is set and not empty.
This module imports nothing heavy, so ``modsenc --help`` stays fast.
"""

from __future__ import annotations

import os

DEFAULT_ZOO = "adapters_zoo"
ZOO_ENV = "MODSENC_ZOO"


def default_zoo() -> str:
    """``$MODSENC_ZOO`` if set and not empty, else ``adapters_zoo`` (relative to the working directory)."""
    return os.environ.get(ZOO_ENV) or DEFAULT_ZOO
