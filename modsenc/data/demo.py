"""Locate the small demo corpus shipped inside the package.

The demo files are package data (``modsenc/data/demo/``), so ``make demo`` and the tests find
them from any working directory and from an installed wheel, not only from a source checkout.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["DEMO_PARALLEL", "DEMO_PARAPHRASE", "demo_path"]

DEMO_PARALLEL = "parallel.tsv"
DEMO_PARAPHRASE = "paraphrase.tsv"


def demo_path(name: str) -> Path:
    """Filesystem path of ``modsenc/data/demo/<name>``; FileNotFoundError lists what is there."""
    if not name or "/" in name or "\\" in name or name in {".", ".."}:
        raise ValueError(f"demo file name must be a plain file name such as {DEMO_PARALLEL!r}, got {name!r}")
    demo_dir = files("modsenc.data").joinpath("demo")
    resource = demo_dir.joinpath(name)
    if not resource.is_file():
        available = (
            sorted(entry.name for entry in demo_dir.iterdir() if entry.is_file()) if demo_dir.is_dir() else []
        )
        listing = ", ".join(available) if available else "none (the demo directory is missing or empty)"
        raise FileNotFoundError(f"no demo file {name!r} in the modsenc package; available: {listing}")
    if not isinstance(resource, Path):
        # Only a zip-imported package gives a non-filesystem resource; the readers need a real file.
        raise RuntimeError(
            f"demo file {name!r} is inside a zipped package ({resource}); install modsenc unzipped"
        )
    return resource
