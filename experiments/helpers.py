"""The helpers the experiments share with the maintained benchmarks (bench/common.py).

The experiments in this folder are run as ``python experiments/x.py``, which puts only experiments/
on the import path; this module adds bench/ once, here, so that every experiment imports the one
copy of the shared helpers (``from helpers import Runner, ...``) instead of loading sibling scripts
by file path or copying them.
"""

from __future__ import annotations

import sys
from pathlib import Path

_BENCH = str(Path(__file__).resolve().parents[1] / "bench")
if _BENCH not in sys.path:
    sys.path.append(_BENCH)

from common import (  # noqa: E402
    KARDES_TARGETS,
    MODSENC,
    Runner,
    kardes_sts_bitext,
    read_tsv,
    replace_section,
    sts_score,
    sts_subset,
    write_tsv,
    xsim_score,
)

__all__ = [
    "KARDES_TARGETS",
    "MODSENC",
    "Runner",
    "kardes_sts_bitext",
    "read_tsv",
    "replace_section",
    "sts_score",
    "sts_subset",
    "write_tsv",
    "xsim_score",
]
