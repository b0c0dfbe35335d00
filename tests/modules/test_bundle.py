"""The zoo on disk: language codes, script detection, backbone installation, atomic bundles."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from modsenc.data.scripts import detect_script
from modsenc.modules import bundle as bundle_module
from modsenc.modules.bundle import Zoo, check_language_code
from modsenc.modules.defaults import shipped_zoo
from modsenc.modules.manifest import (
    BundleIntegrityError,
    BundleManifest,
    default_mode_caveats,
    stages_precision,
)


@pytest.mark.parametrize("code", ["uz", "en", "kk", "kaa", "uzb", "uz-Cyrl", "kaa-Latn"])
def test_valid_codes_pass(code: str) -> None:
    assert check_language_code(code) == code


@pytest.mark.parametrize(
    "code", ["../uz", "UZ", "uzbe", "", "u", "uz/", "..", "uz-cyrl", "uz-Cyr", "uz_Cyrl", "uz-Cyrl-x"]
)
def test_path_like_or_malformed_codes_are_rejected(code: str) -> None:
    with pytest.raises(ValueError, match="invalid language code"):
        check_language_code(code)


def test_detect_script() -> None:
    assert detect_script(["Onam kasalxonada ishlaydi."]) == "Latn"
    assert detect_script(["Менің анам ауруханада жұмыс істейді."]) == "Cyrl"
    assert detect_script(["123 !?"]) == "Zyyy"
    assert detect_script(["Salom", "Привет мир и всё"]) == "Cyrl"  # majority of letters


def test_install_backbone_copies_once_and_refuses_another(tiny_backbone_dir: Path, tmp_path: Path) -> None:
    zoo = Zoo(tmp_path / "zoo")
    with pytest.raises(FileNotFoundError, match="pass --backbone"):
        zoo.install_backbone(None)
    zoo.install_backbone(tiny_backbone_dir)
    assert (
        zoo.backbone_fingerprint()
        == json.loads((tiny_backbone_dir / "modsenc_backbone.json").read_text())["fingerprint"]
    )
    assert zoo.install_backbone(None) == zoo.backbone_dir  # later runs need no --backbone
    other = tmp_path / "other"
    shutil.copytree(tiny_backbone_dir, other)
    manifest = json.loads((other / "modsenc_backbone.json").read_text())
    manifest["fingerprint"] = "0" * 64
    (other / "modsenc_backbone.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="built on another backbone"):
        zoo.install_backbone(other)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(FileNotFoundError, match="modsenc_backbone.json not found"):
        Zoo(tmp_path / "zoo2").install_backbone(plain)


def test_a_crash_while_writing_a_bundle_keeps_the_old_one(tmp_path: Path, monkeypatch) -> None:
    zoo = Zoo(tmp_path / "zoo")
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_text("old a")
    (src / "b.bin").write_text("old b")
    zoo.write_bundle(
        "uz",
        {"a.bin": src / "a.bin", "b.bin": src / "b.bin"},
        BundleManifest(language="uz", modules={"se": {}}),
    )
    (src / "a.bin").write_text("new a")
    (src / "b.bin").write_text("new b")

    real_copy = shutil.copy2
    calls = []

    def failing_copy(source, target, *args, **kwargs):
        calls.append(source)
        if len(calls) == 2:
            raise OSError("disk full")
        return real_copy(source, target, *args, **kwargs)

    monkeypatch.setattr(bundle_module.shutil, "copy2", failing_copy)
    with pytest.raises(OSError, match="disk full"):
        zoo.write_bundle(
            "uz",
            {"a.bin": src / "a.bin", "b.bin": src / "b.bin"},
            BundleManifest(language="uz", modules={"la": {}}),
        )
    bundle = zoo.bundle_dir("uz")
    assert (bundle / "a.bin").read_text() == "old a" and (bundle / "b.bin").read_text() == "old b"
    assert zoo.read_manifest("uz").modules == {"se": {}}
    assert zoo.read_index()["languages"]["uz"]["modules"] == ["se"]
    assert sorted(p.name for p in zoo.root.iterdir()) == [".lock", "index.json", "uz"]  # no leftovers


def test_missing_and_corrupt_manifests_name_the_fix(tmp_path: Path) -> None:
    zoo = Zoo(tmp_path)
    with pytest.raises(FileNotFoundError, match="run `modsenc add-language kk`"):
        zoo.read_manifest("kk")
    (tmp_path / "kk").mkdir()
    (tmp_path / "kk" / "modsenc_bundle.json").write_text("{broken")
    with pytest.raises(ValueError, match="corrupt"):
        zoo.read_manifest("kk")


# A manifest as modsenc wrote it before orthographies and precision were recorded.
OLD_MANIFEST = {
    "format": "modsenc-bundle/1",
    "router": {"langid": "langid.json", "kind": "char-ngram-naive-bayes"},
    "language": "kk",
    "script": "Cyrl",
    "pivot": "en",
    "is_pivot": False,
    "backbone": {"fingerprint": "ab" * 32, "parameters": 1000},
    "modules": {"la": {"path": "la", "parameters": 50, "percent_of_backbone": 5.0}},
    "stages": ["la"],
    "cla_variant": None,
    "data": {"files": {"mono": [{"path": "kk.txt", "count": 3}]}, "counts": {"mono_sentences": 3}},
    "stage_metrics": {"la": {"loss": 2.5}},
    "dev_metrics": {"la": {"paraphrase_p@1": 50.0}},
    "wall_seconds": 12.0,
    "versions": {"torch": "2.0"},
    "created": "2025-01-01T00:00:00Z",
    "file_sha256": {"la/adapter_model.safetensors": "cd" * 32},
}


def test_a_manifest_from_before_precision_loads_with_its_defaults(tmp_path: Path) -> None:
    (tmp_path / "kk").mkdir()
    (tmp_path / "kk" / "modsenc_bundle.json").write_text(json.dumps(OLD_MANIFEST))
    manifest = Zoo(tmp_path).read_manifest("kk")
    assert manifest.precision is None and manifest.orthography is None
    assert manifest.orthography_name == "none" and manifest.backbone_fingerprint == "ab" * 32
    assert manifest.file_sha256 == {"la/adapter_model.safetensors": "cd" * 32}
    info = manifest.describe().splitlines()
    assert info[:3] == ["language kk (Cyrl), pivot en", "stages: la", "training precision: unknown"]
    assert "  mono       kk.txt: 3 rows" in info
    # written back, it is the same object with the new fields at their defaults, in field order
    manifest.write(tmp_path / "kk")
    again = json.loads((tmp_path / "kk" / "modsenc_bundle.json").read_text())
    assert {k: v for k, v in again.items() if k in OLD_MANIFEST} == OLD_MANIFEST
    assert again["precision"] is None and list(again).index("precision") == list(again).index("stages") + 1


def test_a_manifest_field_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    (tmp_path / "kk").mkdir()
    (tmp_path / "kk" / "modsenc_bundle.json").write_text(json.dumps({**OLD_MANIFEST, "stages": "la"}))
    with pytest.raises(BundleIntegrityError, match="stages must be a list, not str"):
        Zoo(tmp_path).read_manifest("kk")


def test_stages_precision() -> None:
    assert stages_precision({"vocab": {"vocab_size": 300.0}, "la": {"precision": "bf16"}}) == "bf16"
    assert stages_precision({"la": {"precision": "fp32"}, "se": {"precision": "bf16"}}) == "fp32+bf16"
    assert stages_precision({"vocab": {"vocab_size": 300.0}}) is None and stages_precision({}) is None


def test_a_default_mode_below_the_backbone_alone_is_a_caveat() -> None:
    """add-language's dev metrics, by hand: ug-ug through the CLA (the default mode) 65.6 against
    the backbone's 66.3 is a caveat; at or above it, or without the default-mode number (a bundle
    from before it was measured), none."""
    dev = {
        "backbone": {"sts_spearman": {"ug-ug": 66.3, "en-ug": 47.3}},
        "se": {"sts_spearman": {"ug-ug": 72.1}},
        "cla": {"sts_spearman": {"ug-ug": 72.1, "en-ug": 60.1}, "sts_spearman_default_mode": {"ug-ug": 65.6}},
    }
    [caveat] = default_mode_caveats(dev, "ug")
    assert "STS ug-ug 65.6 against 66.3" in caveat and "mode='mono'" in caveat
    dev["cla"]["sts_spearman_default_mode"]["ug-ug"] = 66.3
    assert default_mode_caveats(dev, "ug") == []
    del dev["cla"]["sts_spearman_default_mode"]
    assert default_mode_caveats(dev, "ug") == [] and default_mode_caveats({}, "ug") == []


def test_the_shipped_ug_bundle_says_its_caveat_where_a_user_looks() -> None:
    """`zoo list` marks the row, `zoo info ug` says it (issue 49: ug's default mode is below e5
    alone on same-language STS); the other shipped languages carry none."""
    zoo = Zoo(shipped_zoo())
    rows = zoo.table().splitlines()
    assert rows[rows.index(next(r for r in rows if r.startswith("ug "))) + 1] == (
        "      ! 1 caveat(s): `modsenc zoo info ug`"
    )
    info = zoo.read_manifest("ug").describe()
    assert (
        "caveat: same-language similarity in the default mode is below the backbone alone's on the "
        "dev pairs (STS ug-ug 71.0 against 71.4)"
    ) in info
    assert [lang for lang in zoo.languages() if zoo.read_manifest(lang).caveats] == ["ug"]
