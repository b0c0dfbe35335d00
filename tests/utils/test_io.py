"""Atomic writers: per-process temporaries, concurrent writers, clean-up after a kill."""

from __future__ import annotations

import multiprocessing
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from modsenc.utils.io import (
    _temp_prefix,
    atomic_directory,
    atomic_file,
    atomic_write_bytes,
    atomic_write_text,
    clean_stale_temporaries,
    current_umask,
    file_sha256,
    temporary_file,
)


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _write_many(path: str, byte: int, size: int, rounds: int, start) -> None:
    start.wait()
    for _ in range(rounds):
        atomic_write_bytes(path, bytes([byte]) * size)


def _write_directory(path: str, tag: str, rounds: int, start) -> None:
    start.wait()
    for i in range(rounds):
        with atomic_directory(path) as tmp:
            (tmp / "a.txt").write_text(f"{tag}{i}")
            (tmp / "b.txt").write_text(f"{tag}{i}")


def test_temporaries_are_unique_per_process_and_named_after_the_target(tmp_path: Path) -> None:
    first, second = temporary_file(tmp_path / "out.npy"), temporary_file(tmp_path / "out.npy")
    assert first != second
    assert first.name.startswith(f".out.npy.{os.getpid()}.") and first.name.endswith(".tmp")


def test_two_processes_writing_one_file_leave_one_complete_version(tmp_path: Path) -> None:
    target = tmp_path / "vectors.bin"
    size = 4 << 20  # large enough that the writes overlap
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    writers = [ctx.Process(target=_write_many, args=(str(target), b, size, 5, start)) for b in (1, 2)]
    for w in writers:
        w.start()
    start.set()
    for w in writers:
        w.join(60)
        assert w.exitcode == 0
    data = target.read_bytes()
    assert len(data) == size and len(set(data)) == 1 and data[0] in (1, 2)  # one writer's, never a mix
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vectors.bin"]  # no temporaries left


def test_two_processes_swapping_one_directory_leave_one_complete_version(tmp_path: Path) -> None:
    target = tmp_path / "bundle"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    writers = [ctx.Process(target=_write_directory, args=(str(target), t, 20, start)) for t in "xy"]
    for w in writers:
        w.start()
    start.set()
    for w in writers:
        w.join(60)
        assert w.exitcode == 0
    a, b = (target / "a.txt").read_text(), (target / "b.txt").read_text()
    assert a == b and a in ("x19", "y19")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]


def test_stale_temporaries_of_dead_processes_are_removed_and_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "index.json"
    dead, alive = _dead_pid(), os.getppid()
    stale_file = tmp_path / f"{_temp_prefix(target, dead)}abc123.tmp"
    stale_dir = tmp_path / f"{_temp_prefix(target, dead)}k_9x.tmp"
    live_file = tmp_path / f"{_temp_prefix(target, alive)}zzz.tmp"  # a running writer's: kept
    forged = _temp_prefix(target, dead).replace(_temp_prefix(target, dead).split(".")[-2], "0" * 16)
    others = [
        tmp_path / ".index.json.tmp",  # not the pattern (no pid)
        tmp_path / f"{_temp_prefix(tmp_path / 'other.json', dead)}abc.tmp",  # another target's
        tmp_path / f"{forged}abc.tmp",  # the pattern, but a tag modsenc did not compute: a user's
        tmp_path / f".index.json.{dead}.abc123.tmp",  # the pattern of older modsenc versions
        tmp_path / "notes.txt",
    ]
    stale_file.write_text("half")
    stale_dir.mkdir()
    (stale_dir / "x").write_text("half")
    for path in (live_file, *others):
        path.write_text("keep")
    atomic_write_bytes(target, b"{}")
    assert not stale_file.exists() and not stale_dir.exists()
    assert live_file.exists() and all(p.read_text() == "keep" for p in others)
    assert target.read_bytes() == b"{}"


def test_a_kill_between_the_two_renames_of_a_swap_restores_the_backup(tmp_path: Path) -> None:
    target = tmp_path / "bundle"
    backup = tmp_path / f"{_temp_prefix(target, _dead_pid())}q1w2.old"
    backup.mkdir()
    (backup / "weights").write_text("old version")
    assert clean_stale_temporaries(target) == []
    assert (target / "weights").read_text() == "old version" and not backup.exists()


def test_a_failed_block_leaves_the_old_version_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.png"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_file(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("killed")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.png"]


def test_file_sha256_matches_hashlib(tmp_path: Path) -> None:
    path = tmp_path / "x"
    path.write_bytes(b"abc")
    # sha256("abc"), FIPS 180-2 test vector
    assert file_sha256(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


@pytest.mark.parametrize(
    ("umask", "file_mode", "folder_mode"), [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)]
)
def test_outputs_take_their_mode_from_the_umask(
    tmp_path: Path, umask: int, file_mode: int, folder_mode: int
) -> None:
    """mkstemp/mkdtemp make 0600/0700 temporaries; the outputs they become get what open()/mkdir()
    would have given them, also when --overwrite replaces a file of another mode."""
    previous = os.umask(umask)
    try:
        assert current_umask() == umask
        atomic_write_text(tmp_path / "a.json", "{}")
        with atomic_file(tmp_path / "b.npy") as tmp:
            tmp.write_bytes(b"x")
        (tmp_path / "c.txt").write_text("old")
        os.chmod(tmp_path / "c.txt", 0o640)
        atomic_write_text(tmp_path / "c.txt", "new")
        with atomic_directory(tmp_path / "export") as folder:
            (folder / "config.json").write_text("{}")
    finally:
        os.umask(previous)
    for name in ("a.json", "b.npy", "c.txt"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == file_mode, name
    assert stat.S_IMODE((tmp_path / "export").stat().st_mode) == folder_mode
