"""A bundle's manifest, ``ZOO/LANG/modsenc_bundle.json``: the one place it is written and read.

``BundleManifest`` is the manifest as a typed record, its fields in the order they are written:

    format        "modsenc-bundle/1"; a format this modsenc does not read is refused
    router        the router's section (its language profile file, kind, sentences, scripts)
    language      the bundle's language: must be the folder's (a link to another bundle is refused)
    script        ISO 15924 code of the training text's main script
    orthography   the normalisation applied before the tokenizer (``Orthography.to_manifest``)
    pivot         the language the CLA aligns to; ``is_pivot`` for the pivot's own bundle
    backbone      fingerprint of the backbone it was trained on, and its parameter count
    modules       kind -> path, parameters, percent of the backbone (the vocabulary: its size too)
    stages        the add-language stages that trained it, in order
    precision     the training precision the stages ran in (fp32 or bf16; None: written before
                  modsenc recorded it, or no stage trained)
    weights_dtype how the module weights are stored: "fp16" after ``modsenc zoo pack`` (loaded
                  into the backbone's dtype), None as trained
    cla_variant, data, training, recipe_path, stage_metrics, stage_seconds, dev_metrics,
    wall_seconds  how add-language built it: data files and counts, recipe, metrics, timings
    versions      library versions; ``created``: UTC time
    identity_sha256  sha256 of the fields that decide a vector or a route (``IDENTITY_FIELDS``:
                  language, router, orthography, pivot, is_pivot, modules), so an edited label is
                  refused on read; None in bundles written before it (``Zoo.write_bundle`` fills it in)
    file_sha256   sha256 of every other file of the bundle (``Zoo.write_bundle`` fills it in)

``Zoo.write_bundle`` writes it (``write``) and every reader goes through ``read``, which checks
that the file is a manifest, of a format this modsenc reads, and of the language asked for.
Manifests written before a field existed still load: the field takes its default.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modsenc.utils.errors import IntegrityError
from modsenc.utils.io import atomic_write_json
from modsenc.utils.outputs import BUNDLE_MANIFEST, HASHES_KEY, confined

BUNDLE_FORMAT = "modsenc-bundle/1"
SUPPORTED_BUNDLE_FORMATS = (BUNDLE_FORMAT,)
# The manifest fields that change a vector (orthography, modules) or a route (language, router,
# pivot, is_pivot): no file hash covers them, so ``identity_sha256`` does.
IDENTITY_FIELDS = ("language", "router", "orthography", "pivot", "is_pivot", "modules")


PROFILE_FILE = "langid.json"  # the router's language profile (modsenc.routing.langid.LANGID_FILE)


class BundleIntegrityError(IntegrityError):
    """A bundle file is missing, altered, truncated or holds non-finite weights."""


@dataclass(frozen=True, kw_only=True)
class BundleManifest:
    format: str = BUNDLE_FORMAT
    router: dict[str, Any] = field(default_factory=dict)
    language: str
    script: str | None = None
    orthography: dict[str, Any] | None = None  # None: bundles from before orthographies
    pivot: str | None = None
    is_pivot: bool = False
    backbone: dict[str, Any] = field(default_factory=dict)
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)
    stages: list[str] = field(default_factory=list)
    precision: str | None = None
    weights_dtype: str | None = None  # "fp16": stored compact by `modsenc zoo pack`; None: as trained
    cla_variant: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    recipe_path: str | None = None
    stage_metrics: dict[str, Any] = field(default_factory=dict)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    dev_metrics: dict[str, Any] = field(default_factory=dict)
    # Where the bundle is known to do worse than the backbone alone, said where a user looks
    # (`zoo list`, `zoo info`); a label, not part of the identity
    caveats: list[str] = field(default_factory=list)
    wall_seconds: float | None = None
    versions: dict[str, str] = field(default_factory=dict)
    created: str | None = None
    identity_sha256: str | None = None  # None: written before modsenc recorded it
    # What the weights come under: the backbone's, each training file's, the code's (licences.py);
    # None: a bundle from before licences were recorded.
    licence: dict[str, Any] | None = None
    file_sha256: dict[str, str] | None = None

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)}

    # ----------------------------------------------------------------- derived
    @property
    def orthography_name(self) -> str:
        return (self.orthography or {}).get("name", "none")

    @property
    def backbone_fingerprint(self) -> str | None:
        return self.backbone.get("fingerprint")

    def identity(self) -> str:
        """sha256 of the ``IDENTITY_FIELDS`` as canonical JSON (what ``identity_sha256`` holds)."""
        fields = {name: getattr(self, name) for name in IDENTITY_FIELDS}
        text = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    # ----------------------------------------------------------------- writing
    def to_dict(self) -> dict[str, Any]:
        """The JSON object written to disk, fields in declaration order (nested values copied)."""
        return {f.name: _copy(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def replace(self, **changes: Any) -> BundleManifest:
        return dataclasses.replace(self, **changes)

    def write(self, bundle_dir: str | os.PathLike) -> Path:
        """Write ``bundle_dir/modsenc_bundle.json`` atomically."""
        path = Path(bundle_dir) / BUNDLE_MANIFEST
        atomic_write_json(path, self.to_dict())
        return path

    # ----------------------------------------------------------------- reading
    @classmethod
    def read(cls, bundle_dir: str | os.PathLike, lang: str) -> BundleManifest:
        """The manifest of ``lang``'s bundle, checked to be one (JSON object with ``modules``), of a
        format this modsenc reads, and of ``lang`` (not a link to another language's bundle)."""
        path = Path(bundle_dir) / BUNDLE_MANIFEST
        rebuild = f"rebuild the bundle with `modsenc add-language {lang}`"
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise BundleIntegrityError(f"{path} is corrupt ({err}); {rebuild}") from err
        if not isinstance(raw, dict) or not isinstance(raw.get("modules"), dict):
            raise BundleIntegrityError(
                f"{path} is not a bundle manifest (expected a JSON object with a 'modules' mapping); "
                + rebuild
            )
        if raw.get("format") not in SUPPORTED_BUNDLE_FORMATS:
            raise BundleIntegrityError(
                f"{path}: unknown format {raw.get('format')!r}; this modsenc reads "
                f"{', '.join(SUPPORTED_BUNDLE_FORMATS)} (a newer modsenc wrote it?)"
            )
        if raw.get("language") != lang:
            raise BundleIntegrityError(
                f"{path} is the bundle of {raw.get('language')!r}, not of {lang!r} (a copied or linked "
                f"folder?); {rebuild}"
            )
        manifest = cls.from_dict(raw, where=str(path))
        if manifest.identity_sha256 is not None and manifest.identity_sha256 != manifest.identity():
            raise BundleIntegrityError(
                f"{path}: its {', '.join(IDENTITY_FIELDS)} are not the ones it was written with "
                f"(identity_sha256 differs: an edited manifest?); {rebuild}"
            )
        return manifest

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], where: str = "bundle manifest") -> BundleManifest:
        """A manifest from its JSON object; keys of a later modsenc it does not know are dropped
        (the format version says when a change matters), a known key of the wrong type is refused."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        values = {name: value for name, value in raw.items() if name in known}
        for name, value in values.items():
            expected = _JSON_TYPES.get(name)
            if value is not None and expected is not None and not isinstance(value, expected):
                raise BundleIntegrityError(
                    f"{where}: {name} must be {_JSON_NAMES[expected[0]]}, not {type(value).__name__}; "
                    f"rebuild the bundle with `modsenc add-language {raw.get('language')}`"
                )
        return cls(**values)

    # ----------------------------------------------------------------- showing
    def describe(self) -> str:
        """What ``modsenc zoo info LANG`` prints: modules, data, dev metrics, how it was built."""
        lines = [
            f"language {self.language} ({self.script}), pivot {self.pivot}"
            + (" (this is the pivot)" if self.is_pivot else ""),
            f"stages: {', '.join(self.stages)}"
            + (f" (CLA variant {self.cla_variant})" if self.cla_variant else ""),
            f"training precision: {self.precision or 'unknown'}"
            + (f"; weights stored in {self.weights_dtype}" if self.weights_dtype else ""),
        ]
        lines += [f"caveat: {caveat}" for caveat in self.caveats]
        lines.append("modules:")
        for kind, info in sorted(self.modules.items()):
            lines.append(
                f"  {kind:<6} {info['parameters']:>12,} parameters  "
                f"{info['percent_of_backbone']:6.2f}% of backbone"
            )
        lines.append("data:")
        for kind, files in (self.data.get("files") or {}).items():
            for record in files:
                column = f" [{record['column']}]" if record.get("column") else ""
                lines.append(
                    f"  {kind:<10} {record.get('path', record.get('spec'))}{column}: {record['count']} rows"
                )
        lines.append("dev metrics:")
        for stage, metrics in self.dev_metrics.items():
            lines.append(f"  after {stage}: {json.dumps(metrics)}")
        if self.licence:
            lines.append(f"licence: weights {self.licence.get('weights')}; code {self.licence.get('code')}")
            lines += [f"  data {name}: {terms}" for name, terms in (self.licence.get("data") or {}).items()]
        wall = f"{self.wall_seconds:.0f} s" if self.wall_seconds is not None else "? s"
        lines.append(
            f"built {self.created or '?'} in {wall} with "
            + ", ".join(f"{k} {v}" for k, v in self.versions.items())
        )
        return "\n".join(lines)


# ------------------------------------------------------------------------------ router profile
def router_profile(bundle_dir: str | os.PathLike, manifest: BundleManifest) -> Path | None:
    """The router profile the manifest names (``router.langid``, or a listed ``langid.json``),
    checked to be there: a listed profile that is missing would silently route the language's
    sentences elsewhere. None when the bundle has none (English in an e5 zoo may not)."""
    root = Path(bundle_dir)
    name = manifest.router.get("langid")
    if not isinstance(name, str) or not confined(name):
        name = PROFILE_FILE if PROFILE_FILE in (manifest.file_sha256 or {}) else None
    if name is None:
        return None
    path = root / name
    if not path.is_file():
        raise BundleIntegrityError(
            f"{path} is missing from the bundle (its manifest lists it as the router's profile); "
            f"restore it, or rebuild the bundle with `modsenc add-language {manifest.language}`"
        )
    return path


def check_profile_language(path: Path, found: object, lang: str) -> None:
    """A router profile (``found``: the language it names) must be of its bundle's language."""
    if found != lang:
        raise BundleIntegrityError(
            f"{path} is the router profile of {found!r}, not of {lang!r} (a relabelled or mixed-up "
            f"bundle?); rebuild the bundle with `modsenc add-language {lang}`"
        )


def check_router_profile(bundle_dir: str | os.PathLike, manifest: BundleManifest) -> None:
    """``router_profile``'s checks, and that the profile names the manifest's language."""
    path = router_profile(bundle_dir, manifest)
    if path is None:
        return
    try:
        found = json.loads(path.read_text(encoding="utf-8")).get("language")
    except (OSError, ValueError, AttributeError) as err:
        raise BundleIntegrityError(f"{path} is not a modsenc language profile ({err})") from err
    check_profile_language(path, found, manifest.language)


# The JSON type each field must have when present (a str field may also be null).
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "format": (str,),
    "router": (dict,),
    "language": (str,),
    "script": (str,),
    "orthography": (dict,),
    "pivot": (str,),
    "is_pivot": (bool,),
    "backbone": (dict,),
    "modules": (dict,),
    "stages": (list,),
    "precision": (str,),
    "weights_dtype": (str,),
    "cla_variant": (str,),
    "data": (dict,),
    "training": (dict,),
    "recipe_path": (str,),
    "stage_metrics": (dict,),
    "stage_seconds": (dict,),
    "dev_metrics": (dict,),
    "caveats": (list,),
    "wall_seconds": (int, float),
    "versions": (dict,),
    "created": (str,),
    "identity_sha256": (str,),
    "licence": (dict,),
    HASHES_KEY: (dict,),
}


_JSON_NAMES = {dict: "a mapping", list: "a list", str: "a string", bool: "true or false", int: "a number"}


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value)) if isinstance(value, (dict, list)) else value


def stages_precision(stage_metrics: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The training precision the stages ran in, from their metrics (``fit_stage`` logs it):
    ``fp32`` or ``bf16``; several joined with ``+`` (stages resumed on other hardware); None when
    no stage trained (the vocabulary stage trains no weights, and records none)."""
    seen: list[str] = []
    for metrics in stage_metrics.values():
        value = (metrics or {}).get("precision")
        if isinstance(value, str) and value not in seen:
            seen.append(value)
    return "+".join(seen) or None


def default_mode_caveats(dev_metrics: Mapping[str, Any], lang: str) -> list[str]:
    """The caveat ``add-language`` records when its last stage's dev metrics put ``lang``'s
    same-language STS in the default mode (``mode="cross"``: what ``encode`` and every client
    give) below the backbone alone's."""
    stages = [stage for stage in dev_metrics if stage != "backbone"]
    if not stages:
        return []
    pair = f"{lang}-{lang}"
    alone = (dev_metrics.get("backbone") or {}).get("sts_spearman", {}).get(pair)
    default = (dev_metrics[stages[-1]] or {}).get("sts_spearman_default_mode", {}).get(pair)
    if alone is None or default is None or default >= alone:
        return []
    return [
        f"same-language similarity in the default mode is below the backbone alone's on the dev "
        f"pairs (STS {pair} {default:.1f} against {alone:.1f}); for {lang}-only similarity pass "
        f"mode='mono' (its SE, without the alignment adapter)"
    ]
