"""Log messages and progress bars for the command line, usable from every layer.

Library code logs through ``logging.getLogger(__name__)`` and never configures logging itself;
``modsenc`` (the CLI) calls :func:`configure_logging` once: messages go to stderr, one line each,
at INFO by default, DEBUG with ``--verbose``, WARNING with ``--quiet``.

Progress bars (:func:`progress`) are drawn only where they can redraw in place: on an interactive
stderr (a terminal, or a Jupyter kernel), and never with ``--quiet``. In a log file or a pipe they
are off, so a log holds no carriage-return updates; the training loop then logs one line every
``log_every`` steps instead. ``MODSENC_PROGRESS=1`` forces the bars on, ``MODSENC_PROGRESS=0`` off.
The CLI also turns off the bars of the libraries it uses (:func:`silence_third_party_bars`).
"""

from __future__ import annotations

import contextvars
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

PROGRESS_ENV = "MODSENC_PROGRESS"
FORMAT = "%(asctime)s %(levelname)s %(message)s"
VERBOSE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"

_state = {"quiet": False}

# Warnings some libraries log when they are imported, about nothing a modsenc user can act on:
# torchao (imported by transformers whenever it is installed) cannot load its CUDA-only kernel
# libraries on a CPU build of torch, and torch's pytree deprecates the way torchao registers its
# enums. Shown with --verbose only.
IMPORT_NOISE = ("torchao", "torch.utils._pytree")


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record arrives (click's test runner swaps it),
    through ``tqdm.write`` when tqdm is loaded, so a line never lands in the middle of a bar."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            tqdm = sys.modules.get("tqdm")
            if tqdm is not None:
                tqdm.tqdm.write(message, file=sys.stderr)
            else:
                sys.stderr.write(message + "\n")
            sys.stderr.flush()
        except Exception:  # logging must not raise: report it the standard way
            self.handleError(record)


def configure_logging(level: int = logging.INFO) -> None:
    """Send log records to stderr, modsenc's from ``level`` up, other libraries' from WARNING
    (INFO with DEBUG). ``level`` above INFO also turns progress bars off. Calling it again
    replaces the earlier configuration."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(handler)
    handler = _StderrHandler()
    handler.setFormatter(
        logging.Formatter(VERBOSE_FORMAT if level <= logging.DEBUG else FORMAT, datefmt=DATE_FORMAT)
    )
    root.addHandler(handler)
    root.setLevel(logging.INFO if level <= logging.DEBUG else logging.WARNING)
    logging.getLogger("modsenc").setLevel(level)
    for name in IMPORT_NOISE:
        logging.getLogger(name).setLevel(logging.NOTSET if level <= logging.DEBUG else logging.ERROR)
    _state["quiet"] = level > logging.INFO


def log_level_name() -> str:
    """modsenc's effective level as a lower-case name (``info``), e.g. for uvicorn's ``log_level``."""
    return logging.getLevelName(logging.getLogger("modsenc").getEffectiveLevel()).lower()


def _interactive(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        if isatty is not None and isatty():
            return True
    except ValueError:  # a closed stream
        return False
    return "ipykernel" in sys.modules  # a notebook: tqdm.auto draws a widget there


def progress_enabled(stream: Any = None) -> bool:
    """Whether progress bars are drawn: ``MODSENC_PROGRESS`` (1/0) if set; else not after
    ``configure_logging`` above INFO (``--quiet``); else only on an interactive ``stream``
    (default ``sys.stderr``, where tqdm writes)."""
    forced = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if forced:
        return forced not in ("0", "false", "no", "off")
    if _ASKED.get():
        return True
    if _state["quiet"]:
        return False
    return _interactive(sys.stderr if stream is None else stream)


# Other libraries' own switches for their bars (deepfocus's tqdm bars, Hub downloads, datasets).
# Each is read when its library is imported, so they are set before the command imports them.
THIRD_PARTY_BAR_SWITCHES = (
    "TQDM_DISABLE",
    "HF_HUB_DISABLE_PROGRESS_BARS",
    "HF_DATASETS_DISABLE_PROGRESS_BARS",
)


def silence_third_party_bars() -> None:
    """Where :func:`progress_enabled` is false, turn other libraries' progress bars off too, through
    their environment switches (a value the user set is kept). Call it before importing them."""
    if not progress_enabled():
        for name in THIRD_PARTY_BAR_SWITCHES:
            os.environ.setdefault(name, "1")


# Set by ``bars_asked_for``: a call that asked for its bar (``encode(show_progress_bar=True)``).
_ASKED: contextvars.ContextVar[bool] = contextvars.ContextVar("modsenc_bars_asked", default=False)


@contextmanager
def bars_asked_for(asked: bool = True) -> Iterator[None]:
    """Within the block, progress bars are drawn off a terminal too, as sentence-transformers draws
    the bar ``encode(show_progress_bar=True)`` asks for (tqdm's ``disable=None`` would hide it);
    ``MODSENC_PROGRESS=0`` still turns every bar off."""
    token = _ASKED.set(asked)
    try:
        yield
    finally:
        _ASKED.reset(token)


def progress(iterable: Iterable[Any] | None = None, *, enabled: bool = True, **kwargs: Any) -> Any:
    """A ``tqdm.auto`` bar, disabled unless ``enabled`` and :func:`progress_enabled`; a disabled
    bar draws nothing and is used the same way (iterate, ``update``, ``close``)."""
    from tqdm.auto import tqdm  # noqa: PLC0415 - importing tqdm.auto may import IPython

    return tqdm(iterable, disable=not (enabled and progress_enabled()), **kwargs)
