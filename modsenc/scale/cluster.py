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


@contextlib.contextmanager
def ray_session(address: str | None, local_cpus: int | None = None) -> Iterator[Any]:
    """Yield the ``ray`` module connected to a cluster; shut down only a connection opened here.

    ``address=None`` starts a local cluster in this process tree (``local_cpus`` CPUs, default all
    of the machine's); ``"auto"`` joins the cluster running on this machine, ``ray://host:10001``
    a remote one. A session that is already connected (a test's, a notebook's) is used as it is.
    """
    ray = import_ray()
    # modsenc logs its own progress line per shard (rows/s, ETA); Ray's bars would interleave.
    ray.data.DataContext.get_current().enable_progress_bars = False
    if ray.is_initialized():
        yield ray
        return
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
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
