"""Loading an experiments/ script as a module for its tests.

Each test loads its script by file path under a name of its own, because script names
(objectives, ...) would clash with the test packages' names; the module is registered under that
name so that the dataclasses and pickles inside it resolve."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def load_script(filename: str, name: str) -> ModuleType:
    # The scripts import their siblings (helpers, modules_table) by name, as `python experiments/x.py`
    # lets them: a test module outside tests/experiments (whose conftest.py adds the path) run alone
    # needs it too.
    if str(EXPERIMENTS) not in sys.path:
        sys.path.append(str(EXPERIMENTS))
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module
