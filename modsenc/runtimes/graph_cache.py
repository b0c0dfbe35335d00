"""The OpenVINO runtime's on-disk cache, verified on every read.

Two kinds of artefact live under ``$MODSENC_CACHE/openvino`` (``openvino_cache``):

- ``graphs/<key>/``: a language's converted graph (``model.xml``/``model.bin``) and ``graph.json``,
  which records the key's parts (format, OpenVINO release, backbone fingerprint, language, modules,
  the bundle files' sha256) and each graph file's sha256. A folder is read only when its record's
  parts are the ones asked for, its name is their key, and every file has its recorded hash: a
  graph folder swapped with another language's, or edited, is converted again (one log line).
- ``compiled/<key>/<precision>/``: OpenVINO's own compiled blobs (its ``CACHE_DIR``) for that
  graph in that precision, with ``compiled.json`` recording each blob's sha256 once compiled. A
  folder whose files differ from that record (or that has blobs and no record: a compile that
  was killed) is emptied and compiled again, so a damaged blob is never handed to OpenVINO.

Why one compiled folder per graph and precision: OpenVINO 2026.4 names a graph's blob by a hash
that leaves the precision hint out (the fp32 and bf16 blobs of one graph read from disk get the same
file name), so through one shared ``CACHE_DIR`` a bf16 compile after an fp32 one imported the fp32
blob and corrupted the heap (``corrupted size vs. prev_size``, NaN vectors, or a segfault);
tests/modules/test_openvino_runtime.py compiles both in one process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from modsenc.backbone.cache import cache_root
from modsenc.utils.io import atomic_directory, atomic_write_json, directory_lock, file_sha256

GRAPH_FILES = ("model.xml", "model.bin")
GRAPH_RECORD = "graph.json"  # the key's parts and each graph file's sha256
COMPILED_RECORD = "compiled.json"  # each compiled blob's sha256, written after the compile
log = logging.getLogger(__name__)


def openvino_cache() -> Path:
    """Where converted graphs (``graphs/``) and OpenVINO's compiled blobs (``compiled/``) are kept
    between runs: ``$MODSENC_CACHE/openvino`` (default ``~/.cache/modsenc/openvino``)."""
    return cache_root() / "openvino"


def graph_key(parts: dict[str, Any]) -> str:
    """The cache folder name of a graph: sha256 of what it is made of (``parts``: the graph format,
    the OpenVINO release, the backbone fingerprint, the language, its modules and their files'
    sha256), so another bundle, backbone or release never reads it."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _verified_graph_folder(folder: Path, parts: dict[str, Any]) -> bool:
    """Whether ``folder`` holds the graph of ``parts``, every file as recorded (one log line if not)."""
    try:
        record = json.loads((folder / GRAPH_RECORD).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as err:
        log.warning(
            "%s: the cached OpenVINO graph's record cannot be read (%s); converting again", folder, err
        )
        return False
    recorded = record.get("parts") if isinstance(record, dict) else None
    if recorded != parts:  # the folder is named by graph_key(parts): a swapped or edited record
        log.warning(
            "%s: a cached OpenVINO graph was made for another key (language %r, modules %r); "
            "converting again",
            folder,
            recorded.get("language") if isinstance(recorded, dict) else None,
            recorded.get("modules") if isinstance(recorded, dict) else None,
        )
        return False
    hashes = record.get("file_sha256")
    if not isinstance(hashes, dict) or not all(
        _has_hash(folder / name, hashes.get(name)) for name in GRAPH_FILES
    ):
        log.warning("%s: a cached OpenVINO graph differs from its record; converting again", folder)
        return False
    return True


def _has_hash(path: Path, expected: object) -> bool:
    try:
        return file_sha256(path) == expected
    except OSError:  # missing or unreadable: not the recorded file
        return False


def cached_graph(make: Callable[[], Any], cache: Path | None, parts: dict[str, Any], ov: Any) -> Any:
    """The OpenVINO graph ``make()`` builds, read from ``cache / graph_key(parts)`` when it was saved
    there and verifies, else built and saved there (weights as built: fp32, or int8 where
    quantised), so a restart neither merges, converts nor quantises again. ``cache=None``: built,
    not saved. ``ov``: the openvino module."""
    folder = None if cache is None else cache / graph_key(parts)
    if folder is not None and _verified_graph_folder(folder, parts):
        return ov.Core().read_model(folder / GRAPH_FILES[0])
    graph = make()
    if folder is not None:
        with atomic_directory(folder, owner_marker=GRAPH_RECORD) as tmp:
            ov.save_model(graph, tmp / GRAPH_FILES[0], compress_to_fp16=False)
            hashes = {name: file_sha256(tmp / name) for name in GRAPH_FILES}
            atomic_write_json(tmp / GRAPH_RECORD, {"parts": parts, "file_sha256": hashes})
    return graph


def _blobs(folder: Path) -> dict[str, str]:
    return {
        p.name: file_sha256(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name != COMPILED_RECORD
    }


@contextlib.contextmanager
def compiled_folder(cache: Path, key: str, precision: str) -> Iterator[Path]:
    """``cache/compiled/<key>/<precision>``, ready to be OpenVINO's ``CACHE_DIR`` for the block: its
    blobs are the ones recorded after their compile, or it is emptied first (one log line), so
    OpenVINO either imports a verified blob or compiles afresh. The graph's folder is locked
    for the block, so compile and record inside it: two processes that compile one graph (Ray workers,
    server replicas) take turns, and the second imports the first's blob instead of taking a
    blob still being written, with no record yet, for a damaged one and deleting it under the
    writer (which then failed: "cannot set permissions: No such file or directory")."""
    folder = cache / "compiled" / key / precision
    folder.mkdir(parents=True, exist_ok=True)
    # the graph's folder is locked, not this one: the record's atomic write locks this one
    with directory_lock(folder.parent):
        try:
            record = json.loads((folder / COMPILED_RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = None
        found = _blobs(folder)
        if found and found != record:
            log.warning("%s: cached OpenVINO blobs differ from their record; compiling again", folder)
            for name in found:  # this folder is modsenc's own: nothing else is kept in it
                (folder / name).unlink()
            (folder / COMPILED_RECORD).unlink(missing_ok=True)
        yield folder


def record_compiled(folder: Path) -> None:
    """After a compile through ``folder``, inside ``compiled_folder``'s block: record its blobs' sha256."""
    atomic_write_json(folder / COMPILED_RECORD, _blobs(folder))
