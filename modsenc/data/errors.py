"""The one exception type for malformed training data.

A bad row in a corpus of millions is only fixable if the message says which file and which
line, so the location is part of the exception, not something each raiser formats by hand.
"""

from __future__ import annotations

import os

from modsenc.utils.errors import InputError


class DataFormatError(InputError):
    """A data file (or dataset) that cannot be read as the format it is supposed to have.

    ``path`` names the file (or a ``hf:...`` label for a Hugging Face dataset) and ``line`` is the
    1-based line number, or None when the problem is not tied to one line (a missing column, an
    empty file). ``str(err)`` always starts with the location, e.g.
    ``"data/x.tsv, line 17: expected 3 tab-separated fields (header: en de uz), found 2"``.

    It subclasses ValueError so that callers that already catch ValueError around data loading
    keep working.
    """

    def __init__(self, path: str | os.PathLike, line: int | None, message: str) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.reason = message
        location = self.path if line is None else f"{self.path}, line {line}"
        super().__init__(f"{location}: {message}")

    def __reduce__(self) -> tuple[type[DataFormatError], tuple[str, int | None, str]]:
        # The default pickling replays ``cls(*self.args)`` with the formatted message only, which
        # fails for a three-argument __init__; DataLoader workers pickle exceptions to the parent.
        return (type(self), (self.path, self.line, self.reason))
