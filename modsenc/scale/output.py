"""The output folder of ``modsenc scale encode``: its layout, its manifest and its shards' sha256.

Every shard's sha256 is written by the actor that wrote the shard, to ``hashes/part-NNNNN.sha256``,
before the shard file is renamed into place (as its rejects are): a shard on disk always has its
hash, even when the driver is killed before it hears of the shard. A finished job lists them all in
``manifest.json`` (``shard_sha256``, in shard order). ``scale encode --resume`` checks the shards
it keeps against their hash files, ``scale mine`` the shards it reads against the manifest: a shard
changed after it was written (damaged, or rewritten with its rows out of order) is refused, never
kept or mined.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from modsenc.utils.io import atomic_write_json, atomic_write_text, file_sha256

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
SHARDS, REJECTS, HASHES = "shards", "rejects", "hashes"
JOB_KIND = "modsenc-scale-encode"
# Entries of an output folder this command writes; anything else there is someone else's.
OWN = {MANIFEST, SHARDS, REJECTS, HASHES, "rejects.jsonl"}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours the first line of its task errors


class ShardIntegrityError(ValueError):
    """A shard whose bytes differ from the sha256 recorded when it was written (a ValueError, so the
    CLI reports it in one line like any other bad input)."""


def shard_path(output: Path, index: int) -> Path:
    return output / SHARDS / f"part-{index:05d}.parquet"


def rejects_path(output: Path, index: int) -> Path:
    return output / REJECTS / f"part-{index:05d}.jsonl"


def hash_path(output: Path, index: int) -> Path:
    return output / HASHES / f"part-{index:05d}.sha256"


def write_hash(output: Path, index: int, digest: str) -> None:
    atomic_write_text(hash_path(output, index), digest + "\n")


def read_hash(output: Path, index: int) -> str | None:
    """The sha256 recorded for shard ``index``, or None when there is none."""
    path = hash_path(output, index)
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def check_output(output: Path, job: dict[str, Any], resume: bool) -> None:
    """Refuse a folder holding anything but this job's own files (``--resume``) or nothing."""
    if not output.exists():
        return
    if not output.is_dir():
        raise FileExistsError(f"--output {output} is a file; give a folder")
    entries = {p.name for p in output.iterdir()}
    if not entries:
        return
    manifest_path = output / MANIFEST
    if not manifest_path.is_file():
        raise FileExistsError(
            f"--output {output} is not empty and holds no {MANIFEST}: it is not a modsenc scale encode "
            f"output; choose an empty or new folder"
        )
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        old = manifest["job"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise FileExistsError(f"{manifest_path}: not a modsenc scale encode manifest ({err})") from None
    if old.get("kind") != JOB_KIND:
        raise FileExistsError(
            f"--output {output} holds another kind of job ({old.get('kind')}); choose a new folder"
        )
    if not resume:
        raise FileExistsError(
            f"--output {output} holds job {manifest.get('job_id')} ({manifest.get('status')}); "
            f"pass --resume to continue it with the same arguments, or choose another folder"
        )
    changed = sorted(key for key in set(old) | set(job) if old.get(key) != job.get(key))
    if changed:
        raise FileExistsError(
            f"--resume: --output {output} holds job {manifest.get('job_id')}, which differs from this one in "
            f"{', '.join(changed)}; rerun with its arguments or choose another folder"
        )
    strangers = entries - OWN
    if strangers:
        raise FileExistsError(
            f"--output {output} also holds {', '.join(sorted(strangers))}, which modsenc did not write"
        )


def check_finished_shards(output: Path, indices: Sequence[int]) -> None:
    """``--resume``: every shard already on disk against the sha256 its writer recorded, before any
    is kept (a changed shard would otherwise end up in the finished job as if this job wrote it)."""
    unrecorded = 0
    for index in indices:
        path = shard_path(output, index)
        if not path.exists():
            continue
        recorded, actual = read_hash(output, index), file_sha256(path)
        if recorded is None:
            # Only a modsenc older than shard hashes leaves a shard without one. Its shards were
            # renamed into place complete, so they are kept (resuming must not lose days of
            # encoding) and hashed now, with a warning that nothing vouched for them before.
            write_hash(output, index, actual)
            unrecorded += 1
        elif recorded != actual:
            raise ShardIntegrityError(
                f"--resume: shard {path} differs from the sha256 recorded when it was written "
                f"({hash_path(output, index)}): it changed since; delete it and rerun with --resume "
                f"to encode it again"
            )
    if unrecorded:
        log.warning(
            "encode: %d finished shard(s) in %s have no recorded sha256 (written by an older modsenc): "
            "hashed now and kept unverified",
            unrecorded,
            output,
        )


def verify_shards(files: Sequence[Path], hashes: Sequence[str], what: str) -> None:
    """Every shard file against the manifest's sha256, hashed a few at a time (reading the files
    is most of the cost, and ``hashlib`` releases the GIL); the first mismatch in shard order is refused."""
    if len(hashes) != len(files):
        raise ShardIntegrityError(
            f"{what}: the manifest lists {len(hashes)} shard sha256 for {len(files)} shards; "
            "rerun `modsenc scale encode --resume` with the job's arguments"
        )
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        actual = list(pool.map(file_sha256, files))
    for file, expected, got in zip(files, hashes, actual):
        if got != expected:
            raise ShardIntegrityError(
                f"{what}: shard {file} differs from the sha256 recorded when it was written (changed or "
                "damaged since); delete it and rerun `modsenc scale encode --resume` with the job's "
                "arguments (in manifest.json) to encode it again"
            )


def one_line(err: BaseException) -> str:
    """An exception as one line for the manifest's ``reason``: its type and first line."""
    lines = _ANSI.sub("", str(err)).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def mark_failed(output: Path, manifest: dict[str, Any], err: BaseException) -> None:
    """Record in the manifest that the job failed, and why (atomically, as every manifest write)."""
    manifest.update(status="failed", reason=one_line(err))
    atomic_write_json(output / MANIFEST, manifest)
