"""One ``scale encode`` output as ``scale mine`` reads it: its verified shards, optionally one
language's rows, read a part, a chunk or a sample at a time (never the whole matrix)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from modsenc.eval.bitext import l2_normalise
from modsenc.scale.output import (
    INPUT_ID,
    JOB_KIND,
    MANIFEST,
    ShardIntegrityError,
    hash_path,
    read_hash,
    verify_shards,
)

log = logging.getLogger(__name__)


def _hashes_beside(root: Path, files: list[Path], what: str) -> list[str] | None:
    """The sha256 each shard's writer recorded in ``hashes/`` (a manifest without ``shard_sha256``):
    all of them, or None when there are none at all (a modsenc older than shard hashes wrote it).
    Some but not all is refused: a manifest from after shard hashes was edited, or hashes deleted."""
    indices = [
        int(file.stem.rpartition("-")[2]) if file.stem.rpartition("-")[2].isdigit() else -1 for file in files
    ]
    found = [read_hash(root, index) if index >= 0 else None for index in indices]
    if all(digest is None for digest in found):
        return None
    missing = [hash_path(root, index) for index, digest in zip(indices, found) if digest is None]
    if missing:
        raise ShardIntegrityError(
            f"{what}: the manifest records no shard sha256 and {missing[0]} is missing too, so the shards "
            "cannot be verified; rerun `modsenc scale encode --resume` with the job's arguments"
        )
    return [str(digest) for digest in found]


@dataclass
class Embeddings:
    """One ``scale encode`` output: its shard files and their row counts (rows in shard order); with
    ``lang``, only the rows of that language (``rows`` counts those)."""

    root: Path
    files: list[Path]
    rows: list[int]
    dim: int
    lang: str | None = None
    input_ids: bool = False  # the shards carry an input_id column (--id-column)

    @property
    def total(self) -> int:
        return sum(self.rows)

    @classmethod
    def open(cls, path: str | os.PathLike, what: str, lang: str | None = None) -> Embeddings:
        root = Path(path)
        manifest_path = root / MANIFEST
        if not manifest_path.is_file():
            raise FileNotFoundError(
                f"{what} {path}: no {MANIFEST}; give a folder written by `modsenc scale encode`"
            )
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            kind = manifest["job"]["kind"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(f"{manifest_path}: not a modsenc scale encode manifest ({err})") from None
        if kind != JOB_KIND:
            raise ValueError(f"{manifest_path}: a {kind} job, not a scale encode output")
        if manifest.get("status") != "complete":
            raise ValueError(f"{what} {path}: the encode job did not finish; rerun it with --resume first")
        files = [root / name for name in manifest["shard_files"]]
        for file in files:
            if not file.is_file():
                raise FileNotFoundError(f"{what} {path}: shard {file} is missing")
        if manifest["encoded"] == 0:
            raise ValueError(f"{what} {path}: no rows were encoded (all rejected?); nothing to mine")
        recorded = manifest.get("shard_sha256")
        if recorded is None:  # each shard's writer also left its sha256 beside it (hashes/)
            recorded = _hashes_beside(root, files, f"{what} {path}")
        if recorded is not None:  # before any search: a changed shard would pair the wrong rows
            verify_shards(files, recorded, f"{what} {path}")
        else:
            # Written by a modsenc older than shard hashes: refusing would force re-encoding a whole
            # corpus that was fine when written, so it is mined as before, with a warning.
            log.warning(
                "%s %s: the manifest records no shard sha256 (an older modsenc wrote it); its shards "
                "are used unverified (encode it again to have them checked)",
                what,
                path,
            )
        found = cls(root, files, list(manifest["shard_rows"]), int(manifest["dim"]))
        found.input_ids = INPUT_ID in found.schema_names()
        return found.select(lang, what, path) if lang is not None else found

    def schema_names(self) -> list[str]:
        import pyarrow.parquet as pq  # noqa: PLC0415

        return pq.ParquetFile(self.files[0]).schema_arrow.names

    def select(self, lang: str, what: str, path: str | os.PathLike) -> Embeddings:
        """Only the rows whose ``lang`` is ``lang``: the row counts per shard from its lang column."""
        import pyarrow.compute as pc  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        rows, present = [], set()
        for file in self.files:
            column = pq.read_table(file, columns=["lang"]).column("lang")
            rows.append(int(pc.sum(pc.equal(column, lang)).as_py() or 0))
            present.update(v for v in pc.unique(column).to_pylist() if v is not None)
        if sum(rows) == 0:
            raise ValueError(
                f"{what} {path}: no rows of language {lang!r}; languages there: {', '.join(sorted(present))}"
            )
        return Embeddings(self.root, self.files, rows, self.dim, lang, self.input_ids)

    def read(self, file: Path, column: str = "vector") -> Any:
        """One column of a shard (its rows of ``lang`` only, when set)."""
        import pyarrow.compute as pc  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        if self.lang is None:
            return pq.read_table(file, columns=[column]).column(column)
        table = pq.read_table(file, columns=list(dict.fromkeys([column, "lang"])))
        return table.filter(pc.equal(table.column("lang"), self.lang)).column(column)

    def vectors(self, file: Path) -> np.ndarray:
        column = self.read(file).combine_chunks()
        flat = column.values.to_numpy(zero_copy_only=False)
        return np.asarray(flat, dtype=np.float32).reshape(-1, self.dim)

    def chunks(self, rows: int) -> Iterator[tuple[int, np.ndarray]]:
        """(first position, L2-normalised float32 vectors) in chunks of about ``rows`` rows."""
        start, pending, size = 0, [], 0
        for file, n in zip(self.files, self.rows):
            if n == 0:
                continue
            pending.append(self.vectors(file))
            size += n
            if size >= rows:
                block = np.concatenate(pending)
                yield start, l2_normalise(block)
                start, pending, size = start + len(block), [], 0
        if pending:
            yield start, l2_normalise(np.concatenate(pending))

    def parts(self, part_rows: int) -> list[tuple[int, list[str]]]:
        """Consecutive shard groups of at most ``part_rows`` rows (a larger shard is a part alone):
        (first position, files)."""
        parts: list[tuple[int, list[str]]] = []
        start, files, size = 0, [], 0
        for file, n in zip(self.files, self.rows):
            if n == 0:
                continue
            if files and size + n > part_rows:
                parts.append((start, files))
                start, files, size = start + size, [], 0
            files.append(str(file))
            size += n
        if files:
            parts.append((start, files))
        return parts

    def sample(self, size: int, seed: int) -> np.ndarray:
        """``size`` rows drawn uniformly without replacement, read shard by shard."""
        chosen = np.sort(np.random.default_rng(seed).choice(self.total, size=size, replace=False))
        out, first = [], 0
        for file, n in zip(self.files, self.rows):
            lo, hi = np.searchsorted(chosen, [first, first + n])
            if hi > lo:
                out.append(self.vectors(file)[chosen[lo:hi] - first])
            first += n
        return l2_normalise(np.concatenate(out))

    def texts(self, positions: set[int], column: str = "text") -> dict[int, str]:
        """``column`` (as text) of the rows at ``positions``, reading only the shards that hold them."""
        wanted, out, first = np.sort(np.fromiter(positions, dtype=np.int64)), {}, 0
        for file, n in zip(self.files, self.rows):
            lo, hi = np.searchsorted(wanted, [first, first + n])
            if hi > lo:
                values = self.read(file, column).to_pylist()
                out.update({int(p): str(values[p - first]) for p in wanted[lo:hi]})
            first += n
        return out

    def ids(self, positions: set[int]) -> dict[int, str]:
        """Each row's ``input_id`` (``--id-column``), or else its position over the inputs (``id``)."""
        return self.texts(positions, INPUT_ID if self.input_ids else "id")
