"""Joining Ray: a local cluster by default, an existing one with an address.

Ray is an optional extra (``pip install -e '.[ray]'``): it is imported here, on the path that
uses it, never when the library is imported.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)


def import_ray() -> Any:
    try:
        import ray  # noqa: PLC0415 - optional extra
        import ray.data  # noqa: PLC0415
    except ImportError as err:
        raise ImportError(f"the Ray engine needs the ray extra: pip install -e '.[ray]' ({err})") from None
    return ray


def quiet() -> bool:
    """Whether modsenc logs only warnings and errors (``modsenc -q``; a library user's logger level)."""
    return logging.getLogger("modsenc").getEffectiveLevel() > logging.INFO


def _quiet_ray_data() -> None:
    """Ray Data's console handler only from ERROR up (its file handler, in the session's logs, keeps
    everything): it logs each dataset's start and plan at INFO and, at WARNING, that the progress bars
    are off (modsenc turns them off: it logs a line per shard instead)."""
    for handler in logging.getLogger("ray.data").handlers:
        if not isinstance(handler, logging.FileHandler) and type(handler).__name__ != "SessionFileHandler":
            handler.setLevel(logging.ERROR)


@contextlib.contextmanager
def ray_session(address: str | None, local_cpus: int | None = None) -> Iterator[Any]:
    """Yield the ``ray`` module connected to a cluster; shut down only a connection opened here.

    ``address=None`` starts a local cluster in this process tree (``local_cpus`` CPUs, default all
    of the machine's); ``"auto"`` joins the cluster running on this machine, ``ray://host:10001``
    a remote one. A session that is already connected (a test's, a notebook's) is used as it is.

    Quiet (``modsenc -q``): Ray's Python loggers (Ray Data's console included) log errors only, and
    its workers' output stays in the session's log files instead of being copied to this terminal.
    Ray's C++ core still prints its own error lines: ``RAY_BACKEND_LOG_LEVEL``, its only switch,
    prints a line of its own whenever it is set.
    """
    ray = import_ray()
    # modsenc logs its own progress line per shard (rows/s, ETA); Ray's bars would interleave.
    ray.data.DataContext.get_current().enable_progress_bars = False
    if quiet():
        _quiet_ray_data()
    if ray.is_initialized():
        yield ray
        return
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
    if quiet():
        kwargs.update(logging_level=logging.ERROR, log_to_driver=False)
    if address is None:
        kwargs["num_cpus"] = local_cpus or os.cpu_count()
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, ValueError, RuntimeError) as err:
        first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConnectionError(f"--address {address}: cannot join the Ray cluster ({first_line})") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def user_error(err: BaseException) -> BaseException:
    """The exception a worker raised, unwrapped from Ray's task-error layers (for a one-line message)."""
    seen = err
    for _ in range(10):
        cause = getattr(seen, "cause", None) or seen.__cause__
        if cause is None or cause is seen:
            break
        seen = cause
    return seen
