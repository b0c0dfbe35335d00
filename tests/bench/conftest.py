"""The scripts under test are run as ``python bench/x.py``, which puts bench/ on the import path, and
they import their siblings (common.py, encode.py) by name: the tests give them the same path.

Each test loads its script by file path under a name of its own, because script names (scale,
objectives, ...) would clash with the test packages' names."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = str(Path(__file__).resolve().parents[2] / "bench")
if BENCH not in sys.path:
    sys.path.append(BENCH)
