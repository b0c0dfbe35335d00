"""A sentence in a script an installed language converts is read twice (router.py): as written and
converted. When the converted reading decides, with stand-in detector, gate and tests whose numbers
are given here, so every rule is seen on its own."""

from __future__ import annotations

import math

import pytest

from modsenc.routing.router import LanguageRouter


def upper(text: str) -> str:
    """A stand-in conversion: Latin "xx" read as Cyrillic "ХХ" (the test's converted script)."""
    return text.replace("a", "а").replace("b", "б")


class Detector:
    """Each text's (code, confidence, fit) from a table, as written or converted."""

    def __init__(self, table: dict[str, tuple[str | None, float, float]]) -> None:
        self.table = table

    def detect_fit(self, texts, candidates):
        return [self.table[t] for t in texts]

    def detect(self, texts, candidates):
        return [(code, confidence) for code, confidence, _ in self.detect_fit(texts, candidates)]


class Acceptance:
    """Standardised scores from a table; a text passes at -10 or more."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def verdicts(self, texts, chosen, confirmed=None):
        out = []
        for text, lang in zip(texts, chosen):
            score = self.scores.get(text) if lang is not None else None
            out.append((score is None or score >= -10, score))
        return out


class Gate:
    """Vetoes a text named in ``sure``; names ``named`` texts as the chosen language."""

    def __init__(self, sure: dict[str, str] = {}, named: set[str] = set()) -> None:  # noqa: B006
        self.sure, self.named = sure, named

    def judge(self, texts, chosen, installed):
        return [
            (None if t in self.named else self.sure.get(t), t in self.named) for t, _ in zip(texts, chosen)
        ]


def router(table, scores, gate=None) -> LanguageRouter:
    return LanguageRouter(
        Detector(table),
        ["en", "uz", "ug"],
        "en",
        known=["it"],
        gate=gate,
        acceptance=Acceptance(scores),
        readings=[("Latn", "ug", upper)],
    )


@pytest.mark.parametrize(
    ("written", "converted", "scores", "expected"),
    [
        # as written: an Uzbek profile that rejects it; converted: ug, better explained -> ug
        (("uz", 1.0, -9.0), ("ug", 1.0, -8.0), {"ab": -40.0, "аб": -5.0}, "ug"),
        # converted: ug, but explained worse than as written (a Latin language of no Uyghur)
        (("it", 1.0, -7.5), ("ug", 1.0, -8.0), {"аб": -5.0}, None),
        # both enter their bundles: the more typical reading decides
        (("uz", 1.0, -9.0), ("ug", 1.0, -8.0), {"ab": -6.0, "аб": -3.0}, "ug"),
        (("uz", 1.0, -9.0), ("ug", 1.0, -8.0), {"ab": -2.0, "аб": -3.0}, "uz"),
        # converted: another language's, or failing ug's test: the text as written decides
        (("uz", 1.0, -9.0), ("uz", 1.0, -8.0), {"ab": -2.0, "аб": -3.0}, "uz"),
        (("uz", 1.0, -9.0), ("ug", 1.0, -8.0), {"ab": -40.0, "аб": -12.0}, None),
        # converted: ug, but unsure (under min_confidence 0.5)
        (("it", 1.0, -9.0), ("ug", 0.4, -8.0), {"аб": -3.0}, None),
    ],
)
def test_when_the_converted_reading_decides(written, converted, scores, expected) -> None:
    [route] = router({"ab": written, "аб": converted}, scores).route(["ab"])
    assert route.bundle == expected


def test_a_text_the_conversion_leaves_letters_of_its_script_in_is_read_as_written() -> None:
    """ "abc" converts to "абc": its "c" is Latin still, so it is not in ug's Latin alphabet."""
    table = {"abc": ("it", 1.0, -9.0), "абc": ("ug", 1.0, -1.0)}
    [route] = router(table, {"абc": 0.0}).route(["abc"])
    assert (route.route, route.bundle) == ("backbone", None)


def test_the_gates_veto_on_the_text_as_written_stands_unless_it_names_the_language_converted() -> None:
    table = {"ab": ("uz", 1.0, -9.0), "аб": ("ug", 1.0, -8.0)}
    scores = {"ab": -40.0, "аб": -5.0}
    vetoed = router(table, scores, Gate(sure={"ab": "tr"})).route(["ab"])
    assert [(r.route, r.detected) for r in vetoed] == [("backbone", "tr")]
    lifted = router(table, scores, Gate(sure={"ab": "tr"}, named={"аб"})).route(["ab"])
    assert [r.bundle for r in lifted] == ["ug"]


def test_a_detector_without_fit_compares_the_tests_only() -> None:
    """An external detector has no likelihoods: the rule about them is skipped, not guessed."""

    class Plain:
        def detect(self, texts, candidates):
            return [table[t][:2] for t in texts]

    table = {"ab": ("it", 1.0, math.nan), "аб": ("ug", 1.0, math.nan)}
    r = LanguageRouter(
        Plain(), ["en", "ug"], "en", known=["it"], acceptance=Acceptance({"аб": -5.0}),
        readings=[("Latn", "ug", upper)],
    )  # fmt: skip
    assert [x.bundle for x in r.route(["ab"])] == ["ug"]


def test_a_view_its_language_explains_no_better_than_the_text_as_written_is_not_read() -> None:
    """A detector with ``fit_under`` (the view's fit under ug alone, here the table's): "ab" as
    written fits at -7.5, its view "аб" at -8.0, so the view cannot win and is never detected; "cd"
    fits at -9.0 and its view at -8.0, so it is read, and goes to ug."""

    class Fits(Detector):
        def __init__(self, table) -> None:
            super().__init__(table)
            self.detected: list[str] = []

        def detect_fit(self, texts, candidates):
            self.detected += texts
            return super().detect_fit(texts, candidates)

        def fit_under(self, texts, lang, candidates):
            return [self.table[t][2] for t in texts]

    def convert(text: str) -> str:
        return upper(text).replace("c", "с").replace("d", "д")

    table = {
        "ab": ("it", 1.0, -7.5),
        "аб": ("ug", 1.0, -8.0),
        "cd": ("uz", 1.0, -9.0),
        "сд": ("ug", 1.0, -8.0),
    }
    detector = Fits(table)
    r = LanguageRouter(
        detector, ["en", "uz", "ug"], "en", known=["it"], acceptance=Acceptance({"cd": -40.0, "сд": -5.0}),
        readings=[("Latn", "ug", convert)],
    )  # fmt: skip
    assert [x.bundle for x in r.route(["ab", "cd"])] == [None, "ug"]
    assert detector.detected == ["ab", "cd", "сд"]
