"""Reading a data file line by line and as a tab-separated table, with errors naming the line.

Files are decoded line by line in binary mode so that an invalid UTF-8 byte is reported at its line
(a text-mode reader only says "position 81234 of a chunk"), and only a line ending (LF, CRLF or a
lone CR) ends a line (``str.splitlines`` would also split on U+2028, form feeds, etc. inside a
sentence and shift every following row). ``modsenc.data.readers`` builds the corpus readers on these.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from modsenc.data.errors import DataFormatError

PathLike = str | os.PathLike


def check_file(path: PathLike) -> Path:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(
            f"{os.fspath(path)}: no such file (relative paths are resolved from the current directory "
            f"{Path.cwd()})"
        )
    if p.is_dir():
        raise DataFormatError(path, None, "is a directory; expected a data file")
    if not p.is_file():  # /dev/zero, a FIFO, a socket: endless, or readable only once
        raise DataFormatError(path, None, "is not a regular file (a device, FIFO or socket); give a file")
    return p


_LINE_END = re.compile(rb"\r\n|\r|\n")


def _raw_lines(handle: Any, chunk_size: int = 1 << 20) -> Iterator[bytes]:
    """The lines of a binary file without their endings, which may be LF, CRLF or a lone CR (old
    Mac files and some exports): splitting on LF alone would merge a CR-only file into one line."""
    pending = b""
    while chunk := handle.read(chunk_size):
        data = pending + chunk
        # A CR at the end of the chunk may be the first half of a CRLF: decide with the next chunk.
        end = len(data) - 1 if data.endswith(b"\r") else len(data)
        start = 0
        for match in _LINE_END.finditer(data, 0, end):
            yield data[start : match.start()]
            start = match.end()
        pending = data[start:]
    if pending:
        yield pending.removesuffix(b"\r")


def count_lines(path: PathLike) -> int:
    """The number of lines ``iter_lines`` yields, without decoding them."""
    with check_file(path).open("rb") as f:
        return sum(1 for _ in _raw_lines(f))


def iter_lines(path: PathLike, name: str | None = None) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` with the line ending removed, decoding each line separately.

    ``name`` is what errors call the file (e.g. "standard input" for a spooled copy of stdin).
    """
    p = check_file(path)
    path = name or path
    with p.open("rb") as f:
        for lineno, raw in enumerate(_raw_lines(f), start=1):
            yield lineno, decode_line(raw, path, lineno)


def decode_line(raw: bytes, path: PathLike, lineno: int) -> str:
    """One line of a file read in binary mode, as ``iter_lines`` yields it (shared with readers that
    start mid-file, such as ``modsenc.scale``'s shards, so that both give the same text)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFormatError(
            path,
            lineno,
            f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line); "
            "re-save the file as UTF-8",
        ) from None
    if lineno == 1:
        text = text.removeprefix("\ufeff")  # a BOM written by some editors is not part of the header
    return text.rstrip("\r\n")


def _is_blank(text: str) -> bool:
    return "\t" not in text and text.strip() == ""


def read_table(path: PathLike) -> tuple[int, list[str], Iterator[tuple[int, list[str]]]]:
    """Header line number, header fields, and a lazy iterator over ``(line_number, fields)`` rows.

    Blank lines at the end of a file are tolerated (editors add them); a blank line between rows
    is an error because it usually means a row was split in two.
    """
    lines = iter_lines(path)
    header: list[str] | None = None
    header_line = 0
    for lineno, text in lines:
        if not _is_blank(text):
            header_line, header = lineno, [field.strip() for field in text.split("\t")]
            break
    if header is None:
        raise DataFormatError(path, None, "empty file: expected a header row of tab-separated column names")

    def rows() -> Iterator[tuple[int, list[str]]]:
        first_blank: int | None = None
        for lineno, text in lines:
            if _is_blank(text):
                first_blank = first_blank or lineno
                continue
            if first_blank is not None:
                raise DataFormatError(
                    path,
                    first_blank,
                    "blank line between data rows; remove it (a missing translation is an empty cell "
                    "between two tabs, not an empty line)",
                )
            fields = text.split("\t")
            if len(fields) != len(header):
                hint = (
                    "a sentence probably contains a tab; replace tabs inside text by spaces"
                    if len(fields) > len(header)
                    else "a tab is probably missing; a missing translation is an empty cell between two tabs"
                )
                raise DataFormatError(
                    path,
                    lineno,
                    f"expected {len(header)} tab-separated fields (header: {' '.join(header)}), "
                    f"found {len(fields)}; {hint}",
                )
            yield lineno, [field.strip() for field in fields]

    return header_line, header, rows()


def no_rows_error(path: PathLike) -> DataFormatError:
    return DataFormatError(path, None, "has a header but no data rows")
