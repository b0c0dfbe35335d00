"""Language ID from per-bundle character n-gram profiles, and external detectors."""

from __future__ import annotations

import pytest

from modsenc.data.demo import demo_path
from modsenc.data.readers import read_parallel_tsv
from modsenc.routing.langid import (
    CharNgramProfile,
    FastTextDetector,
    LanguageRouter,
    ProfileDetector,
    normalise,
    to_iso1,
)
from tests._zoo import HELD_OUT

LANGS = ["en", "uz", "kk", "de", "tr"]


@pytest.fixture(scope="module")
def profiles() -> dict[str, CharNgramProfile]:
    columns = read_parallel_tsv(demo_path("parallel.tsv")).columns
    return {lang: CharNgramProfile.build(lang, columns[lang]) for lang in LANGS}


def test_normalise_unifies_uzbek_apostrophes_and_digits() -> None:
    assert normalise("Oʻzbek  Oʼzbek O'zbek O’zbek O`zbek 2024") == " o'zbek o'zbek o'zbek o'zbek o'zbek 0 "


def test_held_out_sentences_are_recognised(profiles) -> None:
    detector = ProfileDetector(profiles)
    for lang, texts in HELD_OUT.items():
        for detected, confidence in detector.detect(texts, LANGS):
            assert detected == lang and confidence > 0.9, (lang, detected, confidence)


def test_a_profile_depends_only_on_its_own_language(profiles, tmp_path) -> None:
    """Adding a language adds a profile; the others are untouched (no joint training)."""
    columns = read_parallel_tsv(demo_path("parallel.tsv")).columns
    again = CharNgramProfile.build("uz", columns["uz"])
    assert again.logp == profiles["uz"].logp
    profiles["uz"].save(tmp_path / "langid.json")
    loaded = CharNgramProfile.load(tmp_path / "langid.json")
    assert loaded.logp == profiles["uz"].logp and loaded.unseen == profiles["uz"].unseen
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a modsenc language profile"):
        CharNgramProfile.load(tmp_path / "bad.json")


def test_router_falls_back_when_unsure(profiles) -> None:
    router = LanguageRouter(ProfileDetector(profiles), LANGS, fallback="en", min_confidence=0.5)
    routed = router.route(["", "12345 !!!", HELD_OUT["kk"][0]])
    assert [r.lang for r in routed] == ["en", "en", "kk"]
    assert routed[0].detected is None and routed[2].detected == "kk"
    strict = LanguageRouter(ProfileDetector(profiles), LANGS, fallback="en", min_confidence=1.01)
    assert [r.lang for r in strict.route(HELD_OUT["uz"])] == ["en", "en"]
    with pytest.raises(ValueError, match="fallback language 'fr' is not installed"):
        LanguageRouter(ProfileDetector(profiles), LANGS, fallback="fr")


def test_only_installed_candidates_are_chosen(profiles) -> None:
    detector = ProfileDetector(profiles)
    assert detector.detect([HELD_OUT["uz"][0]], ["en", "kk"])[0][0] in ("en", "kk", None)
    assert detector.detect([HELD_OUT["uz"][0]], ["uz"])[0] == ("uz", 1.0)


def test_iso_codes_from_external_labels() -> None:
    assert to_iso1("__label__uzn_Latn") == "uz"
    assert to_iso1("__label__kaz_Cyrl") == "kk"
    assert to_iso1("__label__en") == "en"
    assert to_iso1("__label__xyz_Latn") is None


def test_a_fasttext_language_id_model_plugs_in(tmp_path) -> None:
    import fasttext  # noqa: PLC0415

    columns = read_parallel_tsv(demo_path("parallel.tsv")).columns
    train = tmp_path / "train.txt"
    codes = {"en": "eng", "uz": "uzn", "kk": "kaz", "de": "deu"}
    train.write_text(
        "".join(f"__label__{codes[lang]}_X {text}\n" for lang in codes for text in columns[lang]),
        encoding="utf-8",
    )
    model = fasttext.train_supervised(
        str(train), epoch=25, minn=2, maxn=4, dim=16, thread=1, seed=0, verbose=0
    )
    model.save_model(str(tmp_path / "lid.bin"))
    detector = FastTextDetector(tmp_path / "lid.bin")
    results = detector.detect([HELD_OUT[lang][0] for lang in codes], list(codes))
    assert [code for code, _ in results] == list(codes)
    assert detector.detect([HELD_OUT["uz"][0]], ["en"])[0][0] in ("en", None)  # restricted to candidates
    with pytest.raises(FileNotFoundError):
        FastTextDetector(tmp_path / "missing.bin")
