"""The one guard every command runs on what it is about to write, before any work.

A file output (``encode --output``, ``mine --output``, ``eval --json/--markdown/--heatmap``) is
refused when it

* is one of the command's inputs (the same file under any name),
* lies in a zoo, a bundle, a backbone, an export or a ``scale encode`` job (a folder holding
  ``index.json`` and ``backbone/``, or a modsenc manifest): those are written by their own commands
  only; or in modsenc's cache (``$MODSENC_CACHE``: imported backbones, OpenVINO graphs),
* names a folder (ends with ``/``),
* exists and is not a regular file (a FIFO, a socket, a device, a folder),
* exists and ``--overwrite`` was not given.

A folder output (a backbone, an export) is refused on the same grounds, with one more: a
non-empty folder is replaced only if modsenc wrote it, proven per file by the manifest it wrote
there (``file_sha256``: the sha256 of every file it wrote). ``--overwrite`` then replaces those
files only; any other file found in the folder (added by the user since) is carried over into the
new folder, and a file modsenc wrote but the user has changed since stops the command.

The manifest names are defined here, the lowest layer, so that this guard, the backbone and the
zoo share one definition of what marks a modsenc artefact.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from modsenc.utils.errors import OutputExistsError
from modsenc.utils.io import atomic_directory, atomic_write_json, file_sha256

BACKBONE_MANIFEST = "modsenc_backbone.json"
BUNDLE_MANIFEST = "modsenc_bundle.json"
EXPORT_MANIFEST = "modsenc_export.json"  # in every `modsenc export` folder (a sentence-transformers model)
ZOO_INDEX = "index.json"
ZOO_BACKBONE_DIR = "backbone"
HASHES_KEY = "file_sha256"  # in every modsenc manifest: {relative posix path: sha256} of what it wrote
SCALE_MANIFEST = "manifest.json"  # a `scale encode` output's, whose job.kind is SCALE_JOB_KIND
SCALE_JOB_KIND = "modsenc-scale-encode"
SCALE_JOB = "scale encode job"  # what artefact_at calls such a folder
CACHE_ENV = "MODSENC_CACHE"


def cache_root() -> Path:
    """``$MODSENC_CACHE``, else ``$XDG_CACHE_HOME/modsenc``, else ``~/.cache/modsenc``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.path.expanduser(os.environ[CACHE_ENV]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(os.path.expanduser(base)) / "modsenc"


class OutputError(OutputExistsError):
    """An output the command must not write (one line, naming the option and the path)."""


def confined(relative: str) -> bool:
    """Whether a manifest's relative path stays inside its folder: not absolute, no ``..`` part."""
    parts = Path(relative).parts
    return bool(parts) and not Path(relative).is_absolute() and ".." not in parts and "\\" not in relative


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def artefact_at(folder: Path) -> str | None:
    """ "zoo", "bundle", "backbone", "export" or "scale encode job" if ``folder`` is one of
    modsenc's artefacts, else None."""
    if (folder / SCALE_MANIFEST).is_file() and _scale_job(folder / SCALE_MANIFEST):
        return SCALE_JOB
    if (folder / BACKBONE_MANIFEST).is_file():
        return "backbone"
    if (folder / EXPORT_MANIFEST).is_file():
        return "export"
    if (folder / BUNDLE_MANIFEST).is_file():
        return "bundle"
    if (folder / ZOO_INDEX).is_file() and (
        (folder / ZOO_BACKBONE_DIR).is_dir() or _zoo_index(folder / ZOO_INDEX)
    ):
        return "zoo"
    return None


def _zoo_index(path: Path) -> bool:
    """A zoo that names its backbone instead of holding it has only its index to tell it by."""
    try:
        return str(json.loads(path.read_text(encoding="utf-8")).get("format", "")).startswith("modsenc-zoo/")
    except (OSError, ValueError, AttributeError):
        return False


def _scale_job(path: Path) -> bool:
    try:
        return json.loads(path.read_text(encoding="utf-8"))["job"]["kind"] == SCALE_JOB_KIND
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _check_not_in_artefact(path: Path, option: str, own_kind: str | None, cache_ok: bool = False) -> None:
    """Refuse ``path`` inside a zoo, bundle, backbone, export, scale job or modsenc's cache (unless
    ``cache_ok``: modsenc filling its own cache); ``path`` itself may be an artefact of ``own_kind``
    (the kind the command writes, which it then replaces under the ownership rules)."""
    resolved = path.resolve()
    cache = cache_root().resolve()
    if not cache_ok and (resolved == cache or cache in resolved.parents):
        raise OutputError(
            f"{option} {path} is inside modsenc's cache {cache} (${CACHE_ENV}), which modsenc manages "
            "itself; choose a path outside it"
        )
    for folder in [resolved, *resolved.parents]:
        kind = artefact_at(folder)
        if kind is None or (folder == resolved and kind == own_kind):
            continue
        where = "is" if folder == resolved else "is inside"
        raise OutputError(
            f"{option} {path} {where} the {kind} {folder}: modsenc never writes into a zoo, bundle, "
            "backbone, export or scale job it is not building; choose a path outside it"
        )


def _check_not_input(path: Path, option: str, inputs: Iterable[str | os.PathLike | None]) -> None:
    for given in inputs:
        if given is None or str(given) == "-":
            continue
        source = Path(given)
        if not source.exists():
            continue
        holds_input = path.exists() and path.is_dir() and path.resolve() in source.resolve().parents
        # An input folder (a model, a zoo, a scale job) holds files the command reads.
        in_input = source.is_dir() and source.resolve() in path.resolve().parents
        same = (path.exists() and _same_file(path, source)) or path.resolve() == source.resolve()
        if holds_input or in_input or same:
            raise OutputError(
                f"{option} {path} is (or holds) the input {given}; writing it would destroy the input: "
                "choose another output path"
            )


def _mode(path: Path) -> int | None:
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return None


def check_output_location(
    path: str | os.PathLike,
    option: str,
    *,
    inputs: Iterable[str | os.PathLike | None] = (),
    own_kind: str | None = None,
) -> Path:
    """The guard's first two rules only (not an input, not inside an artefact), for a folder whose
    contents the command manages itself (a run folder with its stage folders, a zoo)."""
    path = Path(path)
    _check_not_input(path, option, inputs)
    _check_not_in_artefact(path, option, own_kind)
    return path


def check_file_name(path: str | os.PathLike, option: str) -> Path:
    """Refuse a file output given with a trailing ``/`` (which says "a folder", and which ``Path()``
    drops): call it on the path as given, before it becomes a Path. Returns it as a Path."""
    if str(path).endswith(("/", os.sep)):
        raise OutputError(f"{option} {path} names a folder (it ends with /); give a file name")
    return Path(path)


def check_output_file(
    path: str | os.PathLike,
    option: str,
    *,
    inputs: Iterable[str | os.PathLike | None] = (),
    overwrite: bool = False,
) -> Path:
    """Refuse a file output that the rules of this module forbid; returns it as a Path."""
    path = check_file_name(path, option)
    mode = _mode(path)
    if mode is not None and stat.S_ISDIR(mode):
        raise OutputError(f"{option} {path} is a folder; give a file name")
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise OutputError(
            f"{option} {path} is not a regular file (a FIFO, socket or device); it is left as is"
        )
    _check_not_input(path, option, inputs)
    _check_not_in_artefact(path, option, None)
    if mode is not None and not overwrite:
        raise OutputError(f"{option} {path} exists; pass --overwrite to replace it, or choose another path")
    return path


def check_distinct_outputs(outputs: dict[str, str | os.PathLike | None]) -> None:
    """Refuse two options of one command that name the same file (the later write would replace
    the earlier one): ``{option: path}``, None for an option not given."""
    given = [(option, Path(path)) for option, path in outputs.items() if path is not None]
    for i, (option, path) in enumerate(given):
        for other, other_path in given[:i]:
            if path.resolve() == other_path.resolve() or (path.exists() and _same_file(path, other_path)):
                raise OutputError(
                    f"{option} {path} is also {other}: each output needs its own path (one would replace "
                    "the other)"
                )


OwnedFiles = Callable[[Path], "dict[str, str] | None"]  # folder -> {relative path: sha256} modsenc wrote


def _manifest_hashes(manifest_name: str) -> OwnedFiles:
    return lambda folder: read_owned_files(folder, manifest_name)


def read_owned_files(folder: Path, manifest_name: str) -> dict[str, str] | None:
    """The files modsenc wrote in ``folder`` (path -> sha256) per its manifest; None without one."""
    manifest = folder / manifest_name
    if not manifest.is_file():
        return None
    try:
        hashes = json.loads(manifest.read_text(encoding="utf-8")).get(HASHES_KEY)
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return None
    return hashes if isinstance(hashes, dict) else None


def check_output_folder(
    path: str | os.PathLike,
    option: str,
    manifest_name: str,
    *,
    inputs: Iterable[str | os.PathLike | None] = (),
    overwrite: bool = False,
    own_kind: str | None = None,
    owned_files: OwnedFiles | None = None,
    cache_ok: bool = False,
) -> Path:
    """Refuse a folder output that the rules of this module forbid; returns it as a Path.

    ``owned_files(folder)`` replaces the manifest's ``file_sha256`` as the list of what modsenc
    wrote there (a packed zoo: its index and bundle manifests), returning None when it cannot tell.
    ``cache_ok``: the folder is modsenc's own cache entry (``modsenc.backbone.cache``)."""
    path = Path(path)
    mode = _mode(path)
    if mode is not None and not stat.S_ISDIR(mode):
        raise OutputError(f"{option} {path} exists and is not a folder; choose another output path")
    _check_not_input(path, option, inputs)
    _check_not_in_artefact(path, option, own_kind, cache_ok)
    if mode is None or not any(path.iterdir()):
        return path
    owned = (owned_files or _manifest_hashes(manifest_name))(path)
    if owned is None:
        if not (path / manifest_name).is_file():
            what = f"no {manifest_name} in it"
        elif owned_files is None:
            what = f"its {manifest_name} lists no files (written by an older modsenc)"
        else:
            what = f"its {manifest_name} records no earlier output of this command"
        raise OutputError(
            f"{option} {path} is a non-empty folder that modsenc did not write ({what}); it is left "
            "untouched: choose a new or empty folder, or remove it yourself"
        )
    if not overwrite:
        raise OutputError(
            f"{option} {path} holds an earlier modsenc output: pass --overwrite to replace the files "
            "modsenc wrote there (files you added are kept), or choose another folder"
        )
    for name, digest in sorted(owned.items()):
        file = path / name
        if file.is_file() and file_sha256(file) != digest:
            raise OutputError(
                f"{file} was changed after modsenc wrote it; --overwrite replaces only files modsenc "
                "wrote, unchanged: move it away first"
            )
    return path


def _carry_unowned(manifest_name: str, owned_files: OwnedFiles | None = None):
    def carry(old: Path, new: Path) -> None:
        """Copy every file of ``old`` that its manifest does not list into ``new`` (the user's)."""
        owned = (owned_files or _manifest_hashes(manifest_name))(old) or {}
        for entry in sorted(old.rglob("*")):
            name = entry.relative_to(old).as_posix()
            if name == manifest_name or name in owned or (entry.is_dir() and not entry.is_symlink()):
                continue
            target = new / name
            if target.exists() or target.is_symlink():
                raise OutputError(
                    f"{entry} was not written by modsenc and the new output has a file of that name; "
                    "move it away and run again"
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(entry, target, follow_symlinks=False)
        for entry in sorted(old.rglob("*")):  # the user's empty folders too
            if entry.is_dir() and not entry.is_symlink() and not any(entry.iterdir()):
                (new / entry.relative_to(old)).mkdir(parents=True, exist_ok=True)

    return carry


def record_owned_files(folder: Path, manifest_name: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """Write ``manifest`` into ``folder`` with the sha256 of every other file there (what modsenc wrote)."""
    hashes = {
        p.relative_to(folder).as_posix(): file_sha256(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.relative_to(folder).as_posix() != manifest_name
    }
    manifest = {**manifest, HASHES_KEY: hashes}
    atomic_write_json(folder / manifest_name, manifest)
    return manifest


@contextlib.contextmanager
def owned_directory(
    path: str | os.PathLike, manifest_name: str, owned_files: OwnedFiles | None = None
) -> Iterator[Path]:
    """A scratch folder that replaces ``path`` when the block succeeds (``atomic_directory``), for
    a command whose ``check_output_folder`` passed. The block writes ``manifest_name`` into it,
    with ``record_owned_files`` (or as ``owned_files`` reads it); the files of ``path`` that its
    old manifest does not list are carried over into the new folder, so replacing an output never
    loses the user's files."""
    carry = _carry_unowned(manifest_name, owned_files)
    with atomic_directory(path, owner_marker=manifest_name, before_swap=carry) as tmp:
        yield tmp
        if not (tmp / manifest_name).is_file():
            raise RuntimeError(f"an output folder must be written with its {manifest_name}")


@contextlib.contextmanager
def run_lock(work_dir: str | os.PathLike, command: str) -> Iterator[Path]:
    """Hold ``.NAME.lock`` beside ``work_dir`` for the block, so two runs of ``command`` on one work
    folder cannot interleave their stages; a second run fails at once, naming the first's pid.

    The lock is an flock, which the kernel drops when its process dies: a lock file left by a
    killed run is stale by construction and is simply taken over (and the file is kept, since
    removing it could let a third run lock a file that no longer has that name).
    """
    work = Path(work_dir)
    path = work.parent / f".{work.name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise FileExistsError(
                f"{work} is in use by another {command} run (pid {holder}, lock {path}); wait for it "
                "to finish, or give another --work-dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
