"""The inputs of a corpus-scale encode: which files, how many rows each, and how they split into shards.

A shard is a fixed range of rows of one file (``shard_size`` rows, the last one shorter), so the
plan is a pure function of the inputs and ``shard_size``: a resumed job computes the same shards
and knows, from the shard files present, which ones are done. Row ids are global positions over
the inputs in the order given (directories expanded in sorted order), so the output maps back to
the input exactly.

Formats, by suffix: ``.parquet`` (a text column), ``.jsonl``/``.ndjson`` (one JSON object per
line, a text field), anything else plain text (one sentence per line, as ``modsenc encode`` reads
it: every line is a row, empty lines included). ``.gz`` on top of text or JSONL is read through
gzip. Plain text and JSONL shards start at a byte offset found by one scan of the file; a gzip
stream cannot seek, so a gzip shard decompresses the file from its start (prefer many small
``.gz`` files to one large one).

``--id-column`` names a JSONL field or Parquet column holding the user's own id of each row: every
row must have one, a string or an integer (kept as its text, ``7`` as ``"7"``), without tabs or line
breaks (it ends up in ``scale mine``'s TSV). Plain-text inputs have no fields and are refused with it.
Ids are not checked to be unique (that needs every id of the corpus in one place): a duplicate is
carried as it is, and the row position (``id``) stays the unique key.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

from modsenc.data.errors import DataFormatError
from modsenc.data.readers import decode_line

TEXT, JSONL, PARQUET = "text", "jsonl", "parquet"
# Suffixes picked up when a folder is given (a file named explicitly is read whatever its suffix).
_FOLDER_SUFFIXES = (".txt", ".jsonl", ".ndjson", ".parquet")
# JSONL records read before the job starts to find --lang-field. A row may leave its language out
# (--lang decides it), so one record without the field proves nothing; none of the first 100
# having it is a mistyped name, which would otherwise route every row by detection, silently.
_PROBE_RECORDS = 100


def file_format(path: Path) -> tuple[str, bool]:
    """(format, gzip) from the file name."""
    suffixes = [s.lower() for s in path.suffixes]
    compressed = bool(suffixes) and suffixes[-1] == ".gz"
    last = suffixes[-2] if compressed and len(suffixes) > 1 else (suffixes[-1] if suffixes else "")
    if last == ".parquet":
        if compressed:
            raise DataFormatError(
                path, None, "a gzipped Parquet file is not supported (Parquet compresses itself)"
            )
        return PARQUET, False
    return (JSONL if last in (".jsonl", ".ndjson") else TEXT), compressed


def list_inputs(paths: Sequence[str | os.PathLike]) -> list[Path]:
    """The input files, in order: each file as given, each folder's data files in sorted order."""
    if not paths:
        raise ValueError("no --input given; name at least one file or folder")
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
                and any(
                    p.name.lower().endswith(s) or p.name.lower().endswith(s + ".gz") for s in _FOLDER_SUFFIXES
                )
            )
            if not found:
                raise FileNotFoundError(
                    f"--input {given}: the folder holds no .txt, .jsonl, .ndjson or .parquet files "
                    "(or .gz of them)"
                )
            files.extend(found)
        elif path.is_file():
            if not os.access(path, os.R_OK):
                raise PermissionError(f"--input {given}: not readable")
            files.append(path)
        else:
            raise FileNotFoundError(f"--input {given}: no such file or folder")
    seen: set[Path] = set()
    for path in files:
        if path.resolve() in seen:
            raise ValueError(f"--input {path} is given twice; each row would be encoded twice")
        seen.add(path.resolve())
    return files


@dataclass(frozen=True)
class InputFile:
    path: str
    format: str
    gzip: bool
    rows: int
    size: int  # bytes on disk, part of the job's identity (a changed file is another job)
    mtime_ns: int


@dataclass(frozen=True)
class Shard:
    """Rows ``start`` to ``stop`` (0-based, stop excluded) of input file ``file``; ``offset`` is the
    byte where row ``start`` begins (plain text and JSONL without gzip), ``first_id`` its global id."""

    index: int
    file: int
    start: int
    stop: int
    offset: int | None
    first_id: int

    @property
    def rows(self) -> int:
        return self.stop - self.start

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _open(path: Path, compressed: bool) -> IO[bytes]:
    return gzip.open(path, "rb") if compressed else path.open("rb")


class ShardRows(NamedTuple):
    """A shard's rows as read: texts; each row's language value (with ``lang_field``, None where
    absent); each row's id (with ``id_field``, as text)."""

    texts: list[str]
    langs: list[Any] | None
    ids: list[str] | None


def row_id(value: Any, path: str | os.PathLike, line: int | None, where: str, id_field: str) -> str:
    """An ``--id-column`` value as the text stored in the shard: a string or an integer (not a bool,
    whose ``True`` would read as ``1``), without the tab or line break that would break the TSV."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataFormatError(
            path, line, f"{where}{id_field!r} (--id-column) is {value!r}, expected a string or an integer"
        )
    text = str(value)
    if not text or any(c in text for c in "\t\r\n"):
        raise DataFormatError(
            path, line, f"{where}{id_field!r} (--id-column) is {text!r}: empty, or a tab or line break in it"
        )
    return text


def _parquet_columns(path: Path, text_field: str, lang_field: str | None, id_field: str | None = None) -> int:
    import pyarrow.parquet as pq  # noqa: PLC0415 - Parquet only when a Parquet input is given

    try:
        meta = pq.ParquetFile(path)
    except Exception as err:  # pyarrow raises ArrowInvalid and OSError variants for a damaged file
        raise DataFormatError(path, None, f"not a readable Parquet file ({err})") from None
    names = meta.schema_arrow.names
    for field, option in (
        (text_field, "--text-field"),
        (lang_field, "--lang-field"),
        (id_field, "--id-column"),
    ):
        if field is not None and field not in names:
            raise DataFormatError(path, None, f"no column {field!r} ({option}); columns: {', '.join(names)}")
    return meta.metadata.num_rows


def plan_shards(
    files: Sequence[Path],
    shard_size: int,
    text_field: str = "text",
    lang_field: str | None = None,
    id_field: str | None = None,
) -> tuple[list[InputFile], list[Shard]]:
    """Scan every input once (row counts, shard byte offsets) and split it into shards; the fields
    the job reads are checked in each file (before any worker starts)."""
    if shard_size < 1:
        raise ValueError(f"--shard-size must be at least 1, got {shard_size}")
    inputs: list[InputFile] = []
    shards: list[Shard] = []
    next_id = 0
    for number, path in enumerate(files):
        fmt, compressed = file_format(path)
        if id_field is not None and fmt == TEXT:
            raise DataFormatError(
                path,
                None,
                f"plain text has no fields, so no {id_field!r} (--id-column): give JSONL or Parquet",
            )
        offsets: list[int | None] = []
        if fmt == PARQUET:
            rows = _parquet_columns(path, text_field, lang_field, id_field)
            offsets = [None] * ((rows + shard_size - 1) // shard_size)
        else:
            rows, position = 0, 0
            try:
                with _open(path, compressed) as handle:
                    for raw in handle:
                        if rows % shard_size == 0:
                            offsets.append(None if compressed else position)
                        rows += 1
                        position += len(raw)
            except (OSError, EOFError) as err:  # a damaged gzip stream
                raise DataFormatError(path, None, f"cannot be read ({err})") from None
        if rows == 0:
            raise DataFormatError(path, None, "is empty (no rows); remove it from --input")
        if fmt == JSONL:
            _jsonl_fields(path, compressed, text_field, lang_field, id_field)
        stat = path.stat()
        inputs.append(InputFile(str(path), fmt, compressed, rows, stat.st_size, stat.st_mtime_ns))
        for k, offset in enumerate(offsets):
            start = k * shard_size
            stop = min(rows, start + shard_size)
            shards.append(Shard(len(shards), number, start, stop, offset, next_id + start))
        next_id += rows
    return inputs, shards


def _jsonl_fields(
    path: Path, compressed: bool, text_field: str, lang_field: str | None, id_field: str | None = None
) -> None:
    """Refuse a JSONL file one of whose first rows is not an object with a string ``text_field`` and,
    with ``id_field``, a valid id (every row needs both) or whose first rows all lack ``lang_field``,
    before any worker starts (a worker's error comes after the model loads, minutes into a job on a
    cluster)."""
    with _open(path, compressed) as handle:
        head = list(itertools.islice(handle, _PROBE_RECORDS))
    records = [_json_object(raw, str(path), n, text_field, id_field) for n, raw in enumerate(head, 1)]
    if lang_field is not None and not any(lang_field in record for record in records):
        fields = ", ".join(dict.fromkeys(key for record in records for key in record))
        raise DataFormatError(
            path,
            None,
            f"no field {lang_field!r} (--lang-field) in its first {len(records)} rows; fields: {fields}",
        )


def _json_object(
    raw: bytes, path: str, lineno: int, text_field: str, id_field: str | None = None
) -> dict[str, Any]:
    """One JSONL row as its object, with a string ``text_field`` and, with ``id_field``, a valid id."""
    line = decode_line(raw, path, lineno)
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise DataFormatError(path, lineno, f"not valid JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(obj, dict):
        raise DataFormatError(path, lineno, f"expected a JSON object, found {type(obj).__name__}")
    if text_field not in obj:
        raise DataFormatError(
            path, lineno, f"no field {text_field!r} (--text-field); fields: {', '.join(obj)}"
        )
    text = obj[text_field]
    if not isinstance(text, str):
        raise DataFormatError(
            path, lineno, f"field {text_field!r} is {type(text).__name__}, expected a string"
        )
    if id_field is not None:
        if id_field not in obj:
            raise DataFormatError(
                path, lineno, f"no field {id_field!r} (--id-column); fields: {', '.join(obj)}"
            )
        obj[id_field] = row_id(obj[id_field], path, lineno, "field ", id_field)
    return obj


def _lines(info: InputFile, shard: Shard) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw line) of the shard's rows."""
    path = Path(info.path)
    with _open(path, info.gzip) as handle:
        if shard.offset is not None:
            handle.seek(shard.offset)
            skip = 0
        else:
            skip = shard.start
        for i, raw in enumerate(handle):
            if i < skip:
                continue
            number = shard.start + (i - skip)
            if number >= shard.stop:
                return
            yield number + 1, raw


def read_shard(
    info: InputFile,
    shard: Shard,
    text_field: str = "text",
    lang_field: str | None = None,
    id_field: str | None = None,
) -> ShardRows:
    """The shard's texts and, with ``lang_field``, each row's language value (None where absent),
    with ``id_field`` each row's id (``row_id``)."""
    if info.format == PARQUET:
        rows = _parquet_rows(info, shard, text_field, lang_field, id_field)
    else:
        rows = ShardRows([], [] if lang_field else None, [] if id_field else None)
        for lineno, raw in _lines(info, shard):
            if info.format == JSONL:
                obj = _json_object(raw, info.path, lineno, text_field, id_field)
                rows.texts.append(obj[text_field])
                if rows.langs is not None:
                    rows.langs.append(obj.get(lang_field))
                if rows.ids is not None:
                    rows.ids.append(obj[id_field])
            else:
                rows.texts.append(decode_line(raw, info.path, lineno))
                if rows.langs is not None:  # plain text has no language field: --lang decides
                    rows.langs.append(None)
    if len(rows.texts) != shard.rows:
        raise DataFormatError(
            info.path,
            None,
            f"has {shard.start + len(rows.texts)} rows, fewer than when the job was planned: it changed",
        )
    return rows


def _parquet_rows(
    info: InputFile, shard: Shard, text_field: str, lang_field: str | None, id_field: str | None
) -> ShardRows:
    """``read_shard`` of a Parquet file: only the row groups the shard overlaps are read."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    path = Path(info.path)
    handle = pq.ParquetFile(path)
    columns = [text_field] + [f for f in (lang_field, id_field) if f is not None]
    first, groups = 0, []
    for g in range(handle.metadata.num_row_groups):
        n = handle.metadata.row_group(g).num_rows
        if first < shard.stop and first + n > shard.start:
            groups.append(g)
        first += n
    table = handle.read_row_groups(groups, columns=list(dict.fromkeys(columns)))
    skip = sum(handle.metadata.row_group(g).num_rows for g in range(groups[0])) if groups else 0
    table = table.slice(shard.start - skip, shard.rows)
    texts = table.column(text_field).to_pylist()
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise DataFormatError(
                path, None, f"row {shard.start + i + 1}: column {text_field!r} is {text!r}, expected a string"
            )
    langs = table.column(lang_field).to_pylist() if lang_field else None
    ids = None
    if id_field is not None:
        ids = [
            row_id(value, path, None, f"row {shard.start + i + 1}: column ", id_field)
            for i, value in enumerate(table.column(id_field).to_pylist())
        ]
    return ShardRows(texts, langs, ids)
