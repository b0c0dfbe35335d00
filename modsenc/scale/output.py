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
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from modsenc.utils.errors import IntegrityError
from modsenc.utils.io import atomic_file, atomic_write_json, atomic_write_text, file_sha256
from modsenc.utils.outputs import SCALE_JOB_KIND, SCALE_MANIFEST

log = logging.getLogger(__name__)

MANIFEST = SCALE_MANIFEST
SHARDS, REJECTS, HASHES = "shards", "rejects", "hashes"
JOB_KIND = SCALE_JOB_KIND
# Entries of an output folder this command writes; anything else there is someone else's.
OWN = {MANIFEST, SHARDS, REJECTS, HASHES, "rejects.jsonl"}
# The shard column of each row's --id-column value (a fixed name: the user's own column may well be
# called "id" or "text", which the shard already has).
INPUT_ID = "input_id"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours the first line of its task errors


class ShardIntegrityError(IntegrityError):
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


def job_record(
    zoo: Any,
    inputs: Sequence[Any],
    lang: str,
    lang_field: str | None,
    text_field: str,
    mode: str,
    normalize: bool,
    vector_dtype: str,
    shard_size: int,
    quantize: str | None,
    other: str = "backbone",
    id_column: str | None = None,
    dtype: str = "auto",
    runtime: str = "auto",
) -> dict[str, Any]:
    """The manifest's ``job``: what the output depends on (and nothing else: workers, batch size and
    address may change on resume). ``zoo`` is a ``modsenc.modules.bundle.Zoo``, ``inputs`` the
    ``modsenc.scale.inputs.InputFile`` of each input."""
    job: dict[str, Any] = {
        "kind": JOB_KIND,
        "zoo": str(zoo.root.resolve()),
        "backbone_fingerprint": zoo.backbone_fingerprint(),
        "languages": zoo.languages(),
        "inputs": [asdict(f) for f in inputs],
        "lang": lang,
        "lang_field": lang_field,
        "text_field": text_field,
        "mode": mode,
        "normalize": normalize,
        "vector_dtype": vector_dtype,  # stored (float32, float16)
        "dtype": dtype,  # computed (auto, fp32, bf16), as asked
        "runtime": runtime,
        "shard_size": shard_size,
        "quantize": quantize,
        "other": other,
    }
    if id_column is not None:  # only when given: an output written before --id-column keeps its job id
        job["id_column"] = id_column
    return job


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


def shard_table(
    ids: Sequence[int],
    files: Sequence[int],
    lines: Sequence[int],
    langs: Sequence[str | None],
    routes: Sequence[str],
    texts: Sequence[str],
    vectors: np.ndarray,
    input_ids: Sequence[str] | None = None,
    why: tuple[Sequence[str | None], Sequence[float], Sequence[bool]] | None = None,
) -> Any:
    """One shard as a pyarrow table in the documented column order (``modsenc.scale.encode``);
    ``input_id`` only when the job has an ``--id-column``, so older readers see the old schema;
    ``why``: each row's ``detected``, ``confidence`` and ``unsure`` from the router (issue 48),
    written after ``route`` when given."""
    import pyarrow as pa  # noqa: PLC0415 - pyarrow comes with the ray extra, imported where used

    columns = {
        "id": pa.array(ids, pa.int64()),
        "file": pa.array(files, pa.int32()),
        "line": pa.array(lines, pa.int64()),
        "lang": pa.array(langs, pa.string()),
        "route": pa.array(routes, pa.string()),
    }
    if why is not None:
        columns["detected"] = pa.array(why[0], pa.string())
        columns["confidence"] = pa.array(why[1], pa.float32())
        columns["unsure"] = pa.array(why[2], pa.bool_())
    columns["text"] = pa.array(texts, pa.string())
    if input_ids is not None:
        columns[INPUT_ID] = pa.array(input_ids, pa.string())
    columns["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])
    return pa.table(columns)


def write_embeddings(
    output: str | os.PathLike,
    vectors: np.ndarray,
    texts: Sequence[str],
    shard_size: int,
    lang: str | Sequence[str] = "xx",
    input_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Vectors computed elsewhere, written in ``scale encode``'s output format (for benchmarks and tests
    of ``scale mine`` on synthetic data). ``lang``: every row's language, or one per row (a mixed
    set); ``input_ids``: the rows' ``--id-column`` values. ``output`` must not exist yet."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    output = Path(output)
    if output.exists():
        raise FileExistsError(f"{output} exists; give a new folder")
    if len(vectors) != len(texts):
        raise ValueError(f"{len(vectors)} vectors for {len(texts)} texts")
    (output / SHARDS).mkdir(parents=True)
    n, dim = vectors.shape
    langs = [lang] * n if isinstance(lang, str) else list(lang)
    starts = range(0, n, shard_size)
    for index, start in enumerate(starts):
        block = np.ascontiguousarray(vectors[start : start + shard_size], dtype=np.float32)
        rows = len(block)
        table = shard_table(
            np.arange(start, start + rows),
            np.zeros(rows, np.int32),
            np.arange(start + 1, start + rows + 1),
            langs[start : start + rows],
            ["bundle"] * rows,
            list(texts[start : start + rows]),
            block,
            None if input_ids is None else list(input_ids[start : start + rows]),
        )
        with atomic_file(shard_path(output, index)) as tmp:
            pq.write_table(table, tmp)
    manifest = {
        "job": {"kind": JOB_KIND, "synthetic": True, "rows": n, "dim": dim},
        "job_id": "synthetic",
        "status": "complete",
        "shards": len(starts),
        "rows": n,
        "dim": dim,
        "encoded": n,
        "rejected": 0,
        "shard_files": [str(shard_path(output, i).relative_to(output)) for i in range(len(starts))],
        "shard_rows": [min(shard_size, n - s) for s in starts],
        "shard_sha256": [file_sha256(shard_path(output, i)) for i in range(len(starts))],
    }
    atomic_write_json(output / MANIFEST, manifest)
    return manifest


def finish_job(output: Path, manifest: dict[str, Any], shards: list[Any]) -> dict[str, Any]:
    """Every shard checked written (and its hash recorded), the rejects gathered into
    ``rejects.jsonl``, and the manifest marked complete with the counts and hashes; returns it."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    missing = [s.index for s in shards if not shard_path(output, s.index).exists()]
    if missing:
        raise RuntimeError(
            f"{len(missing)} shards were not written (first: {missing[0]}); rerun with --resume"
        )
    counts, hashes = [], []
    for s in shards:
        meta = pq.ParquetFile(shard_path(output, s.index))
        counts.append(meta.metadata.num_rows)
        hashes.append(read_hash(output, s.index))
        if hashes[-1] is None:  # each writer records it before its shard: someone removed it since
            raise ShardIntegrityError(
                f"shard {shard_path(output, s.index)} has no recorded sha256; "
                "delete it and rerun with --resume"
            )
        if manifest["dim"] is None:
            manifest["dim"] = meta.schema_arrow.field("vector").type.list_size
    rejected_lines: list[str] = []
    for s in shards:
        path = rejects_path(output, s.index)
        if path.exists():
            rejected_lines.extend(path.read_text(encoding="utf-8").splitlines(keepends=True))
    atomic_write_text(output / "rejects.jsonl", "".join(rejected_lines))
    manifest.update(
        status="complete",
        encoded=sum(counts),
        rejected=len(rejected_lines),
        shard_files=[str(shard_path(output, s.index).relative_to(output)) for s in shards],
        shard_rows=counts,
        shard_sha256=hashes,
    )
    atomic_write_json(output / MANIFEST, manifest)
    log.info(
        "encode: %d rows encoded, %d rejected (listed in %s)",
        sum(counts),
        len(rejected_lines),
        output / "rejects.jsonl",
    )
    return manifest
