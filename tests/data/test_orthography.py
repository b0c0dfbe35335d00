"""Orthography handling: Uzbek apostrophes and Cyrillic land on one canonical spelling."""

from __future__ import annotations

import pytest

from modsenc.data.demo import demo_path
from modsenc.data.orthography import get_orthography, orthography_for
from modsenc.data.readers import read_parallel_tsv
from modsenc.routing.langid import CharNgramProfile, ProfileDetector

UZ = get_orthography("uz")


@pytest.mark.parametrize(
    "variant",
    [
        "Oʻzbekiston gʻalaba taʼlim",  # U+02BB, U+02BC: the standard
        "O'zbekiston g'alaba ta'lim",  # ASCII
        "O‘zbekiston g‘alaba ta’lim",  # U+2018, U+2019
        "O’zbekiston g’alaba ta’lim",
        "O`zbekiston g`alaba ta`lim",  # backtick
        "O´zbekiston g´alaba ta´lim",  # acute accent
        "Ўзбекистон ғалаба таълим",  # Cyrillic
    ],
)
def test_uzbek_spellings_become_one(variant) -> None:
    assert UZ.normalize(variant) == "O'zbekiston g'alaba ta'lim"


def test_uzbek_cyrillic_by_hand() -> None:
    # е is "ye" at a word start and after a vowel, "e" after a consonant; ц is "ts"; ь disappears
    assert UZ.normalize("Ер юзида чиройли шаҳар бор") == "Yer yuzida chiroyli shahar bor"
    assert UZ.normalize("Мен келдим, оила ҳам келди.") == "Men keldim, oila ham keldi."
    assert UZ.normalize("Концерт, қўшиқ, ЁЗ") == "Kontsert, qo'shiq, YoZ"


def test_quotes_and_other_scripts_stay() -> None:
    # apostrophes that are not between two letters are quotation marks: kept as typed
    assert UZ.normalize("U 'salom' dedi.") == "U 'salom' dedi."
    assert UZ.normalize("ʻsalomʼ") == "ʻsalomʼ"
    assert UZ.normalize("2019'da") == "2019'da"
    assert get_orthography("none").normalize("Oʻzbek") == "Oʻzbek"
    assert get_orthography("kk").normalize("Менің анам") == "Менің анам"
    assert orthography_for("de").name == "none" and orthography_for("uz") is UZ


def test_unknown_orthography_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown orthography 'uzb'; known: az, kk, none, tr, ug, uz"):
        get_orthography("uzb")


def test_router_recognises_cyrillic_uzbek_from_a_latin_profile() -> None:
    """The uz profile is built from Latin text plus its Cyrillic rendering (script_variants)."""
    corpus = read_parallel_tsv(demo_path("parallel.tsv"))
    train, held_out = slice(0, 240), slice(240, 320)
    profiles = {
        "uz": CharNgramProfile.build(
            "uz", [v for t in corpus.columns["uz"][train] for v in UZ.script_variants(t)]
        ),
        "kk": CharNgramProfile.build("kk", corpus.columns["kk"][train]),
        "ru": CharNgramProfile.build("ru", corpus.columns["ru"][train]),
    }
    latin_only = {**profiles, "uz": CharNgramProfile.build("uz", corpus.columns["uz"][train])}
    cyrillic_uz = [UZ.script_variants(t)[1] for t in corpus.columns["uz"][held_out]]
    assert all(any("\u0400" <= ch <= "\u04ff" for ch in t) for t in cyrillic_uz)
    found = [lang for lang, _ in ProfileDetector(profiles).detect(cyrillic_uz, ["uz", "kk", "ru"])]
    # 60 of 80 from 240 short training sentences (the rest go to ru); a Latin-only profile: none
    assert found.count("uz") >= 0.7 * len(cyrillic_uz)
    without = [lang for lang, _ in ProfileDetector(latin_only).detect(cyrillic_uz, ["uz", "kk", "ru"])]
    assert without.count("uz") <= 0.1 * len(cyrillic_uz)
    latin = [
        lang
        for lang, _ in ProfileDetector(profiles).detect(corpus.columns["uz"][held_out], ["uz", "kk", "ru"])
    ]
    assert latin.count("uz") >= 0.9 * len(latin)
    # and Kazakh and Russian are still theirs
    for lang in ("kk", "ru"):
        texts = corpus.columns[lang][held_out]
        hits = [found for found, _ in ProfileDetector(profiles).detect(texts, ["uz", "kk", "ru"])]
        assert hits.count(lang) >= 0.9 * len(texts)


@pytest.mark.parametrize("name", ["uz", "az", "tr", "kk"])
def test_tokenizer_normaliser_equals_normalize(name) -> None:
    """What export puts into a standalone tokenizer gives the same text as modsenc's own."""
    orthography = get_orthography(name)
    texts = [
        "Ер юзида чиройли шаҳар бор",
        "Мен келдим, оила ҳам келди. aе Ёз ъе",
        "Концерт, қўшиқ, ЁЗ",
        "O‘zbekiston g`alaba ta’lim, İstanbul’a",
        "U 'salom' dedi. 2019'da",
        "Менің анам ауруханада жұмыс істейді.",
        "e\u0301 café",
    ]
    normaliser = orthography.tokenizer_normalizer()
    for text in texts:
        assert normaliser.normalize_str(text) == orthography.normalize(text), text


def test_uyghur_arabic_script_becomes_the_bundles_cyrillic() -> None:
    """UEY letter by letter to Kardeş's Uyghur Cyrillic (the hamza dropped, y + a as я); the
    Cyrillic and Latin text the bundle already reads is left alone; the router profile is not
    given extra variants (it converts Arabic-script text instead)."""
    ug = get_orthography("ug")
    assert ug.normalize("ئۇلار ياخشى ئادەملەر.") == "улар яхши адәмләр."
    assert ug.normalize("Улар яхши адәмләр, iPhone.") == "Улар яхши адәмләр, iPhone."
    assert ug.script_variants("ئۇلار ياخشى") == ["ئۇلار ياخشى"]


def test_uyghur_latin_becomes_the_bundles_cyrillic() -> None:
    """ULY by hand: digraphs first (gh ғ, ch ч, ya я), e is ә and é is е, w is в; an apostrophe
    between letters splits a would-be digraph (n'g) or is the hamza, which Cyrillic does not
    write. Only a text mostly in Latin is converted (a Cyrillic sentence's "VCR" stays)."""
    ug = get_orthography("ug")
    assert (
        ug.normalize("Biz kéler hepte taghqa sayahetke barmaqchi.")
        == "Биз келәр һәптә тағқа саяһәткә бармақчи."
    )
    assert ug.normalize("Qet'iy, in'gliz, Wetinimiz!") == "Қәтий, инглиз, Вәтинимиз!"
    assert ug.normalize("Мениң Висиар (VCR) яхши ишләйду.") == "Мениң Висиар (VCR) яхши ишләйду."
    assert "Latn" in ug.scripts and ug.transliterate["Latn"] == "ug-latin-to-cyrillic"


def test_uyghur_cyrillic_written_back_in_uly() -> None:
    """The inverse, for the gate's calibration: ә e, е é, в w, ң ng, ғ gh; н before г is n'g and
    з before һ z'h (else ULY reads one digraph), and the way back gives the Cyrillic again. Only
    scripts whose inverse is known have one (Arabic: None)."""
    ug = get_orthography("ug")
    cyrillic = "Биз келәр һәптә тағқа саяһәткә бармақчи, Вәтинимиз."
    assert ug.written_in("Latn", cyrillic) == "Biz kéler hepte taghqa sayahetke barmaqchi, Wetinimiz."
    assert ug.written_in("Latn", "инглиз, қәзһә, Ңа") == "in'gliz, qez'he, Nga"
    assert ug.written_in("Latn", "ЧАЙ Шәһәр, әсһаб, егһа") == "CHAY Sheher, es'hab, ég'ha"
    assert ug.normalize("CHAY Sheher, es'hab, ég'ha") == "ЧАЙ Шәһәр, әсһаб, егһа"
    assert ug.normalize(ug.written_in("Latn", cyrillic)) == cyrillic
    assert ug.normalize(ug.written_in("Latn", "инглиз, қәзһә")) == "инглиз, қәзһә"
    assert ug.written_in("Arab", cyrillic) is None
    assert get_orthography("uz").written_in("Cyrl", "Shahar kutubxonasi") == "Шаҳар кутубхонаси"
    assert get_orthography("kk").written_in("Latn", "Қала") is None


def test_azerbaijani_cyrillic_becomes_latin_in_its_own_alphabet_only() -> None:
    """The 1958-1991 alphabet by hand: г q, ҝ g, ҹ c, ј y, ы ı, capital И İ. A Cyrillic letter
    that alphabet lacks stays (Tatar's я, җ, ң; Russian's й), so the router never reads such a
    text as Azerbaijani."""
    az = get_orthography("az")
    assert az.normalize("Биз ҝәлән һәфтә даға сәјаһәтә ҝедәҹәјик, әҝәр һава јахшы олса.") == (
        "Biz gələn həftə dağa səyahətə gedəcəyik, əgər hava yaxşı olsa."
    )
    assert az.normalize("Исмајыл Ыраг Гарабағ") == "İsmayıl Iraq Qarabağ"
    assert az.normalize("Без җыенабыз, әгәр һава яхшы булса") == "Bez җıenabız, əqər hava яxşı bulsa"
    assert az.normalize("Bakı və Gəncə") == "Bakı və Gəncə"  # its Latin, untouched
    normaliser = az.tokenizer_normalizer()
    for text in ("Исмајыл Ыраг Гарабағ", "Без җыенабыз, Ёлка"):
        assert normaliser.normalize_str(text) == az.normalize(text)
