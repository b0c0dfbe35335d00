"""Atomic file and directory writes: a crash leaves the old version or the new one, never a mix.

Every temporary lives next to its target as ``.NAME.PID.TOKEN.TAG.RANDOM.tmp`` (a directory's
backup during the swap as ``...old``): unique per process, so two runs writing the same path each
finish their own complete file (the last one to finish wins) instead of sharing one temporary.
TOKEN is random per run and TAG an HMAC of NAME, PID and TOKEN under a key kept in the user's cache
folder (``$XDG_CACHE_HOME/modsenc/temporaries.key``): nobody can guess a name that passes for a
temporary. A run killed mid-write leaves its temporary behind; the next write of the same target
removes the temporaries whose process is gone and whose TAG checks out (a user's file that merely
looks like one is never touched), and restores a backup if the kill fell between a directory
swap's two renames.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".tmp"
BACKUP_SUFFIX = ".old"


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a rename inside ``path`` durable (best effort: some file systems refuse a directory fsync)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


_RUN_TOKEN = secrets.token_hex(8)  # this process's; a forked child gets its own pid anyway


@functools.cache
def _temporaries_key() -> bytes:
    """The per-user key that tags temporaries (created once, readable by the user only).

    Without a writable cache folder the key is this process's own: its temporaries are still
    unguessable, only a later run cannot recognise (and so never removes) them.
    """
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "modsenc"
    path = folder / "temporaries.key"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            key = path.read_bytes()
            if len(key) == 32:
                return key
            raise OSError(f"{path} is not a key") from None
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(32))
        return path.read_bytes()
    except OSError:
        return secrets.token_bytes(32)


def _tag(name: str, pid: int, token: str) -> str:
    return hmac.new(_temporaries_key(), f"{name}\0{pid}\0{token}".encode(), "sha256").hexdigest()[:16]


def _temp_prefix(path: Path, pid: int | None = None) -> str:
    """``.NAME.PID.TOKEN.TAG.``: this process's (tests pass another ``pid`` to fake a dead writer's)."""
    pid = os.getpid() if pid is None else pid
    return f".{path.name}.{pid}.{_RUN_TOKEN}.{_tag(path.name, pid, _RUN_TOKEN)}."


def _temp_pattern(path: Path) -> re.Pattern[str]:
    # mkstemp/mkdtemp fill the random part with [a-z0-9_]; the pid says whose it is.
    return re.compile(
        rf"^\.{re.escape(path.name)}\.(\d+)\.([0-9a-f]{{16}})\.([0-9a-f]{{16}})\.[a-z0-9_]+"
        rf"({re.escape(TEMP_SUFFIX)}|{re.escape(BACKUP_SUFFIX)})$"
    )


def _is_ours(path: Path, match: re.Match[str]) -> bool:
    """A temporary written by modsenc: its tag is the HMAC of its name, pid and token."""
    pid, token, tag = int(match.group(1)), match.group(2), match.group(3)
    return hmac.compare_digest(tag, _tag(path.name, pid, token))


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """An exclusive flock on ``directory`` itself, for the block: processes (and threads, each
    through its own descriptor) take turns, without a lock file left among the user's files; the
    kernel drops it when its holder dies."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):  # a file system without flock: the renames stay atomic
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def clean_stale_temporaries(path: str | os.PathLike) -> list[Path]:
    """Remove the temporaries of ``path`` left by killed processes; returns what was removed.

    Only temporaries whose tag proves modsenc named them (see the module's docstring) and whose PID
    is no longer running are touched (the PID test assumes the writers ran on this machine). If
    ``path`` itself is missing and a dead writer's backup exists, the backup is renamed back first:
    the kill fell between the two renames of a directory swap, and the backup is the last complete
    version.
    """
    path = Path(path)
    if not path.parent.is_dir():
        return []
    pattern = _temp_pattern(path)
    removed = []
    with directory_lock(path.parent):  # a live writer's directory swap never sees a half-restored state
        stale = []
        for entry in path.parent.iterdir():
            match = pattern.match(entry.name)
            if match and _is_ours(path, match) and not _process_alive(int(match.group(1))):
                stale.append((entry, match.group(4)))
        for entry, kind in sorted(stale):
            if kind == BACKUP_SUFFIX and not path.exists():
                with contextlib.suppress(OSError):
                    os.replace(entry, path)
                    continue
            _remove(entry)
            removed.append(entry)
    return removed


def check_regular_target(path: str | os.PathLike) -> None:
    """Refuse to replace anything but a regular file (or a link): a FIFO, a socket or a device
    file named as an output would otherwise become a plain file and stop being what it was."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"{path} is a folder; give a file name")
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise FileExistsError(f"{path} is not a regular file (a FIFO, socket or device); it is left as is")


def current_umask() -> int:
    """The process's umask, read without changing it where Linux reports it (``os.umask`` can only
    be read by setting it, which another thread could observe)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _as_created(path: str | os.PathLike, folder: bool = False) -> None:
    """Give a temporary (mkstemp: 0600, mkdtemp: 0700) the mode ``open``/``mkdir`` would have given
    the output, so an output meant to be shared is readable as the umask allows."""
    os.chmod(path, (0o777 if folder else 0o666) & ~current_umask())


def temporary_file(path: str | os.PathLike) -> Path:
    """Create (empty) and return a temporary file for ``path``, unique to this process."""
    path = Path(path)
    check_regular_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=TEMP_SUFFIX, dir=path.parent)
    os.close(fd)
    _as_created(tmp)
    return Path(tmp)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write ``path``'s content to; it replaces ``path`` when the block succeeds.

    For writers that need a file name rather than bytes (``np.lib.format.open_memmap``, matplotlib):
    the content is fsynced before the rename, and the temporary removed if the block fails.
    """
    path = Path(path)
    tmp = temporary_file(path)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    check_regular_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        _as_created(tmp)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def check_replaceable(path: str | os.PathLike, owner_marker: str | None) -> None:
    """Refuse to replace ``path`` unless it is missing, an empty folder, or holds ``owner_marker``.

    The marker (a manifest modsenc writes into every folder it creates) proves the folder is the
    tool's own: replacing a folder deletes its contents, and a user's folder must never be lost to a
    mistyped ``--output``.
    """
    path = Path(path)
    # One lstat, not exists() then is_dir(): another writer's swap may move the folder away in
    # between, and a folder that vanished is not "a file".
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        raise FileExistsError(f"{path} exists and is not a folder; choose another output path")
    try:
        if owner_marker is None or (path / owner_marker).is_file() or not any(path.iterdir()):
            return
    except FileNotFoundError:  # moved away by a concurrent swap while we looked
        return
    raise FileExistsError(
        f"{path} is a non-empty folder that modsenc did not write (no {owner_marker} in it); "
        "it is left untouched: choose a new or empty folder, or remove it yourself"
    )


@contextlib.contextmanager
def atomic_directory(
    path: str | os.PathLike,
    owner_marker: str | None = None,
    before_swap: Callable[[Path, Path], None] | None = None,
) -> Iterator[Path]:
    """Yield a scratch directory that replaces ``path`` only when the block succeeds.

    With ``owner_marker``, an existing non-empty ``path`` is replaced only if it holds that file
    (see ``check_replaceable``), checked before the block and again at the swap.
    ``before_swap(old, new)`` runs under the lock just before an existing ``path`` is swapped out
    (``modsenc.utils.outputs`` copies the files modsenc did not write into the new folder there).
    The swap is two renames (old -> backup, new -> path) under a lock on the parent folder, so
    concurrent writers of one path take turns (the last one wins, each leaving a complete
    directory). A kill between the renames leaves the backup, which the next write restores or
    removes (see ``clean_stale_temporaries``).
    """
    path = Path(path)
    check_replaceable(path, owner_marker)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(path)
    tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=TEMP_SUFFIX, dir=path.parent))
    try:
        _as_created(tmp, folder=True)
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    with directory_lock(path.parent):
        try:
            check_replaceable(path, owner_marker)  # another process may have created it meanwhile
            if before_swap is not None and path.is_dir():
                before_swap(path, tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        backup = None
        if path.exists():
            backup = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=BACKUP_SUFFIX, dir=path.parent))
            os.replace(path, backup)  # replaces the empty placeholder mkdtemp made
        try:
            os.replace(tmp, path)
        except OSError as err:
            if backup is not None and not path.exists():
                os.replace(backup, path)
            shutil.rmtree(tmp, ignore_errors=True)
            if err.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise FileExistsError(f"{path} could not be replaced ({err.strerror})") from err
            raise
        fsync_dir(path.parent)
    if backup is not None:
        shutil.rmtree(backup, ignore_errors=True)


def json_digest(obj: Any) -> str:
    """sha256 of ``obj`` as canonical JSON: the key that tells a finished stage's config from another."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def file_sha256(path: str | os.PathLike, chunk_size: int = 1 << 20) -> str:
    """sha256 of a file's bytes, read in chunks (bundle and data files can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()
