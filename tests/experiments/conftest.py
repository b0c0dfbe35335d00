"""The scripts under test are run as ``python experiments/x.py``, which puts experiments/ on the import
path, and they import their siblings (helpers.py, modules_table.py) by name: the tests give them the
same path.

Each test loads its script by file path under a name of its own, because script names (objectives,
...) would clash with the test packages' names."""

from __future__ import annotations

import sys
from pathlib import Path

EXPERIMENTS = str(Path(__file__).resolve().parents[2] / "experiments")
if EXPERIMENTS not in sys.path:
    sys.path.append(EXPERIMENTS)
