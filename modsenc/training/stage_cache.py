"""Finished training stages, kept on disk and reused while their inputs are unchanged.

One folder per stage (``add-language``: WORK/la, WORK/se, ...; ``finetune``: OUTPUT/m, OUTPUT/mc):

    STAGE/key.json    {"key": ...}, written when the stage starts: marks the folder as the command's
    STAGE/run/        checkpoints and metrics of the training (``--resume`` continues from them)
    STAGE/<output>/   the result: add-language's ``module/``, finetune's ``backbone/``
    STAGE/done.json   {"key": ..., "metrics": ..., "seconds": ...}, written last, when it finished

The key hashes everything the result depends on (configuration, data, the stages before it). A
finished stage with the same key is reused; a folder with another key is stale and starts over; an
unfinished one with the same key continues with ``--resume``. A non-empty folder without
``key.json`` was not made by the command and is never deleted.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from modsenc.utils.io import atomic_write_json

KEY_FILE = "key.json"
DONE_FILE = "done.json"
RUN_DIR = "run"


class StageDir:
    """One stage's folder. ``output`` names the result inside it; ``command`` and ``option`` (the
    command's output option) go into the messages."""

    def __init__(self, path: str | Path, output: str, command: str, option: str) -> None:
        self.path = Path(path)
        self.output = self.path / output
        self.run_dir = self.path / RUN_DIR
        self.command = command
        self.option = option

    @property
    def name(self) -> str:
        return self.path.name

    def _read(self, name: str) -> dict[str, Any] | None:
        path = self.path / name
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def finished(self, key: str) -> dict[str, Any] | None:
        """``done.json`` (key, metrics, seconds) if the stage finished with this key, else None."""
        done = self._read(DONE_FILE)
        return done if done and done.get("key") == key and self.output.exists() else None

    def begin(self, key: str, resume: bool) -> None:
        """Make the folder ready to train the stage with ``key``: a stale one (another key) is
        removed; an unfinished one with this key is kept for ``resume`` (and refused without it)."""
        if self.path.exists():
            started = self._read(KEY_FILE)
            if started is None and any(self.path.iterdir()):
                # Not a stage this command started (it writes key.json first): never delete it.
                raise FileExistsError(
                    f"{self.path} is a non-empty folder that {self.command} did not create (no "
                    f"{KEY_FILE}); it is left untouched: choose another {self.option}"
                )
            if (started or {}).get("key") != key:
                shutil.rmtree(self.path)  # another config, data or starting point: start over
            elif not resume:
                raise FileExistsError(
                    f"{self.path} holds an unfinished run: pass --resume to continue it, or remove it"
                )
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path / KEY_FILE, {"key": key})

    def finish(self, key: str, record: dict[str, Any]) -> None:
        """Mark the stage finished: ``done.json`` holds the key and ``record`` (metrics, seconds)."""
        atomic_write_json(self.path / DONE_FILE, {"key": key, **record})
