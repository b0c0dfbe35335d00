"""The router: which modules each sentence goes through, in an open world.

A zoo holds a few languages; the text it meets is in many. The router therefore decides among the
installed languages *and* the languages it knows but the zoo lacks:

1. The detector (by default the bundles' own character n-gram profiles, beside the shipped
   background profiles of languages without a bundle: ``modsenc.routing.background``) names the
   most likely language. A low-resource language is best told apart from its close relatives by
   its own profile, trained on its own text; a background profile lets "Russian" or "Kazakh" win
   against it instead of the nearest installed language winning by default.
2. A general language-ID model (``modsenc.routing.gate``: fastText's lid.176) vetoes an installed
   language only when it is sure the text is in a language without a bundle and gives the
   installed one almost no probability, and never below the highest probability it gave that
   label on that installed language's own held-out sentences (plus a margin): it is good at the
   big languages and poor at the low-resource ones a zoo holds (lid.176 takes most Uzbek for
   Turkish), so it never decides among a zoo's close relatives by a label it confuses them with.
3. Each bundle's acceptance test (``modsenc.routing.acceptance``): the sentence must be typical of
   the chosen language by an absolute score, so a language no profile describes (Tajik, Tatar)
   does not land on its nearest installed neighbour (issue 48).

Text in a script that an installed bundle's orthography converts but its profile is not written in
(Uyghur's Arabic and Latin scripts, to the Cyrillic of the ug bundle; Azerbaijani's Cyrillic, to
its Latin) is read twice: as written, and converted, where the converted reading counts only if it
is that language's, passes its test, and the reading as written enters no bundle or is less typical
of its own (a Latin Uyghur sentence is not Uzbek because Uzbek's profile is nearest as written).
Each sentence then takes one of three routes: ``bundle`` (its language's modules), ``backbone``
(no modules: the backbone's own multilingual space, for text in a language the zoo lacks) or
``refused``. Policies say what happens when the detector is unsure of an installed language
(``unsure``) and when the text is in a language the zoo lacks (``other``); docs/results/router.md
measures them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from modsenc.data.scripts import detect_script, letter_script
from modsenc.modules.bundle import check_language_code
from modsenc.routing.langid import Detector, sharing_normalised
from modsenc.utils.errors import InputError

# ``encode(lang=BACKBONE)``: the backbone alone, no modules (what text without a bundle gets)
BACKBONE = "backbone"
UNSURE_POLICIES = ("fallback", "best", "refuse")
OTHER_POLICIES = ("backbone", "refuse", "best")
# A converted reading is read in full when its fit under its language, scored alone, is above the
# text as written's fit less this (log-likelihood per n-gram, about -3 to -12): the two tables sum
# a text's n-grams in different orders, and may differ in the last bits
FIT_MARGIN = 1e-9


@dataclass(frozen=True)
class Detection:
    """Where one sentence goes, and why."""

    lang: str | None  # its bundle's language; for the backbone or a refusal, the language detected
    route: str  # "bundle", "backbone" or "refused"
    confidence: float  # the detector's calibrated posterior for what it detected
    detected: str | None  # what was recognised before any policy (None: no language recognised)
    unsure: bool = False  # below min_confidence, or nothing recognised
    message: str = ""  # why it was refused (the error adds which sentence)

    @property
    def bundle(self) -> str | None:
        """The installed language whose modules encode the sentence (None: none)."""
        return self.lang if self.route == "bundle" else None


class RefusedSentenceError(InputError):
    """A sentence the router's policies refuse: ``index`` is its position in the call, ``reason``
    why (the message is "sentence INDEX: REASON")."""

    def __init__(self, reason: str, index: int, message: str | None = None) -> None:
        super().__init__(message or f"sentence {index}: {reason}")
        self.index, self.reason = index, reason


class UnsureLanguageError(RefusedSentenceError):
    """``unsure="refuse"``: the router could not tell a sentence's language confidently."""


class OtherLanguageError(RefusedSentenceError):
    """``other="refuse"``: a sentence is in a language the zoo has no bundle for."""


class Gate(Protocol):
    def vetoes(
        self, texts: Sequence[str], chosen: Sequence[str | None], installed: set[str]
    ) -> list[str | None]:
        """For each text, the language it is surely in when that is not ``chosen`` (what the
        profiles recognised; None: nothing) and has no bundle (not one of ``installed``); None to
        let ``chosen`` stand."""
        ...


class Acceptor(Protocol):
    def verdicts(
        self, texts: Sequence[str], chosen: Sequence[str | None], confirmed: Sequence[bool] | None = None
    ) -> list[tuple[bool, float | None]]:
        """Whether each text is typical of its ``chosen`` installed language (True: no test), and
        its standardised score under that language's test (None: no test)."""
        ...


@dataclass(frozen=True)
class Reading:
    """What the detector, the gate and the acceptance test say of one text, read one way."""

    code: str | None  # the detector's language (None: no language recognised)
    confidence: float
    veto: str | None  # the gate's language without a bundle, when it overrules ``code``
    accepted: bool  # by ``code``'s acceptance test (True when it has none)
    score: float | None = None  # the standardised score under that test (None: no test)
    fit: float | None = None  # the best profile's log-likelihood per n-gram (None: not asked)


# A converted reading: the script it applies to, the installed language whose orthography
# converts that script, and the conversion.
ScriptReading = tuple[str, str, Callable[[str], str]]


class LanguageRouter:
    """Picks the route (and so the modules) for each sentence.

    ``languages`` are installed; ``known`` are languages the detector can recognise that have no
    bundle (the background profiles). A sentence recognised confidently as an installed language
    goes to its bundle, unless ``gate`` vetoes it. One recognised as another language is handled by
    ``other``: ``backbone`` (default) encodes it with no modules, ``best`` sends it to the most
    likely installed language anyway (the closed-set behaviour), ``refuse`` refuses it naming the
    language. A sentence the detector is unsure about (confidence below ``min_confidence``, or no
    language recognised) is handled by ``unsure``: ``fallback`` sends it to ``fallback`` (by
    default the pivot), ``best`` to the best installed guess (else the fallback), ``refuse``
    refuses it.

    ``acceptance`` (``modsenc.routing.acceptance``) is the bundles' absolute test: a sentence the
    profiles give to an installed language enters its bundle only if it is typical of that
    language, or the gate's model confirms the language; otherwise no bundle accepts it and
    ``other`` decides (a language without a profile, Tajik or Tatar, would else land on its
    nearest installed neighbour). ``readings`` are the scripts an installed language's
    orthography converts to what its profile is written in (Uyghur's Arabic and Latin to the
    Cyrillic of its bundle): a sentence in such a script is also read converted (the module
    docstring says when that reading wins). ``world`` are the ``known`` languages whose profiles
    are the small world ones (``modsenc.routing.background``): they judge text as written, and a
    converted reading, which asks only whether the text is the installed language in another
    script, is scored without them (for half the cost of reading it). With ``screen_readings`` a
    converted view is read in full only if its language's profile alone explains it better than
    the best profile explains the text as written, the one way it could win (``_may_win``).
    """

    def __init__(
        self,
        detector: Detector,
        languages: Sequence[str],
        fallback: str,
        min_confidence: float = 0.5,
        unsure: str = "fallback",
        other: str = "backbone",
        known: Sequence[str] = (),
        gate: Gate | None = None,
        acceptance: Acceptor | None = None,
        readings: Sequence[ScriptReading] = (),
        world: Sequence[str] = (),
        screen_readings: bool = True,
    ) -> None:
        if fallback not in languages:
            raise ValueError(f"fallback language {fallback!r} is not installed ({', '.join(languages)})")
        if unsure not in UNSURE_POLICIES:
            raise ValueError(f"unsure must be one of {UNSURE_POLICIES}, got {unsure!r}")
        if other not in OTHER_POLICIES:
            raise ValueError(f"other must be one of {OTHER_POLICIES}, got {other!r}")
        if isinstance(min_confidence, bool) or not (
            isinstance(min_confidence, (int, float)) and 0 <= min_confidence <= 1
        ):
            raise ValueError(f"min_confidence must be a number from 0 to 1, got {min_confidence!r}")
        self.detector, self.languages, self.fallback = detector, list(languages), fallback
        self.min_confidence, self.unsure, self.other = min_confidence, unsure, other
        self.known = [lang for lang in known if lang not in self.languages]
        self.world = set(world) & set(self.known)
        self.gate, self.acceptance = gate, acceptance
        self.readings = [
            (script, lang, convert) for script, lang, convert in readings if lang in self.languages
        ]
        # whether a converted view is first scored under its language alone (``_may_win``); off,
        # every view is read in full, with the same routes (what bench/encode.py compares)
        self.screen_readings = screen_readings

    def _judge(
        self, texts: list[str], codes: list[str | None], installed: set[str]
    ) -> tuple[list[str | None], list[bool]]:
        """(the gate's veto, whether it confirms the profiles' choice) of each text."""
        if self.gate is None or not texts:
            return [None] * len(texts), [False] * len(texts)
        judge = getattr(self.gate, "judge", None)
        if judge is None:  # a gate with vetoes only
            return self.gate.vetoes(texts, codes, installed), [False] * len(texts)
        judged = judge(texts, codes, installed)
        return [v for v, _ in judged], [c for _, c in judged]

    def _candidates(self, only: str | None) -> list[str]:
        """The languages a reading is detected among: a converted one (``only``) without the
        world profiles."""
        return self.languages + [lang for lang in self.known if only is None or lang not in self.world]

    def _may_win(self, views: list[str], written: list[Reading], lang: str) -> list[bool]:
        """Whether each converted view could win over its text as written (``_converted_wins``):
        only if ``lang``'s profile explains it better than the best profile explains the text as
        written. Scored against ``lang``'s profile alone, so the full reading (every profile, the
        gate, the acceptance test) runs only for the views that pass: on Uzbek or English Latin
        text, which converts to ULY and back, none does (issue 48: routing's cost). The margin
        covers the last bits of a sum taken in another order; a detector without fits reads all."""
        fit_under = getattr(self.detector, "fit_under", None)
        if not self.screen_readings or fit_under is None or any(r.fit is None for r in written):
            return [True] * len(views)
        fits = fit_under(views, lang, self._candidates(lang))
        return [float(f) > r.fit - FIT_MARGIN for f, r in zip(fits, written)]  # type: ignore[operator]

    def _read(self, texts: list[str], views: list[str], only: str | None = None) -> list[Reading | None]:
        """Each text's reading, with the profiles and the acceptance test on ``views`` (the text as
        written, or converted) and the gate on the text as written. With ``only`` (a converted
        reading, of that language), a text the detector does not give to ``only`` gets None, and no
        gate or test is run for it."""
        candidates = self._candidates(only)
        detect_fit = getattr(self.detector, "detect_fit", None) if self.readings else None
        if detect_fit is not None:
            found = detect_fit(views, candidates)
        else:
            found = [(code, confidence, None) for code, confidence in self.detector.detect(views, candidates)]
        keep = [i for i, (code, _, _) in enumerate(found) if only is None or code == only]
        codes = [found[i][0] for i in keep]
        kept_texts, kept_views = [texts[i] for i in keep], [views[i] for i in keep]
        installed = set(self.languages)
        vetoes, confirmed = self._judge(kept_texts, codes, installed)
        if only is not None and any(v is not None for v in vetoes):
            # the gate's model knows a language in the scripts its training text was in: it calls
            # Cyrillic Azerbaijani Tatar, and the converted text Azerbaijani; a veto on the text as
            # written stands unless the model names the language on the converted text. Only the
            # text as written can confirm (widen the test): converted Tatar looks Azerbaijani too.
            _, named = self._judge(kept_views, codes, installed)
            vetoes = [None if n else v for v, n in zip(vetoes, named)]
        verdicts: list[tuple[bool, float | None]] = [(True, None)] * len(keep)
        if self.acceptance is not None and keep:
            tested = [c if c in installed and v is None else None for c, v in zip(codes, vetoes)]
            verdicts = self.acceptance.verdicts(kept_views, tested, confirmed)
        readings: list[Reading | None] = [None] * len(texts)
        for j, i in enumerate(keep):
            code, veto, (passed, score) = codes[j], vetoes[j], verdicts[j]
            if self.acceptance is not None:
                # letters no profile recognised are accepted by no bundle either; text without
                # letters (empty, digits, punctuation) keeps the unsure policy (the fallback)
                passed = passed and (
                    code is not None or veto is not None or not any(ch.isalpha() for ch in views[i])
                )
            readings[i] = Reading(code, found[i][1], veto, passed, score, found[i][2])
        return readings

    def _enters(self, reading: Reading) -> bool:
        """Whether the reading puts its text in an installed language's bundle."""
        return (
            reading.accepted
            and reading.veto is None
            and reading.code in self.languages
            and reading.confidence >= self.min_confidence
        )

    def _converted_wins(self, converted: Reading | None, written: Reading) -> bool:
        """The converted reading decides when it enters its language's bundle, the profiles explain
        it better than any explains the text as written (a Latin text of no Uyghur that happens to
        use ULY's letters and so converts: Minjiang, Pipil, Afar on UDHR), and either the text as
        written enters no bundle or is less typical of its language than the converted text is."""
        if converted is None or not self._enters(converted):
            return False
        if converted.fit is not None and written.fit is not None and converted.fit <= written.fit:
            return False
        if not self._enters(written):
            return True
        return converted.score is not None and written.score is not None and converted.score > written.score

    def route(self, texts: Sequence[str], raise_refused: bool = True) -> list[Detection]:
        """Each text's route. A refused sentence raises ``UnsureLanguageError`` or
        ``OtherLanguageError`` naming it, unless ``raise_refused`` is False (then its detection
        says ``refused`` and why: what ``detect_languages`` reports)."""
        with sharing_normalised():
            return self._route(list(texts), raise_refused)

    def _route(self, texts: list[str], raise_refused: bool) -> list[Detection]:
        readings = self._read(texts, texts)
        if self.readings and texts:
            scripts = [detect_script([text]) for text in texts]
            for script, lang, convert in self.readings:
                idx = [i for i, s in enumerate(scripts) if s == script]
                views = [convert(texts[i]) for i in idx]
                # a text the conversion leaves letters of its script in is not in that language's
                # alphabet (Tatar's җ and ң, Kazakh's қ and ң are not Azerbaijani Cyrillic's)
                whole = [j for j, view in enumerate(views) if not _has_script_letters(view, script)]
                idx, views = [idx[j] for j in whole], [views[j] for j in whole]
                if idx:
                    may = self._may_win(views, [readings[i] for i in idx], lang)  # type: ignore[misc]
                    idx, views = [i for i, m in zip(idx, may) if m], [v for v, m in zip(views, may) if m]
                if not idx:
                    continue
                converted = self._read([texts[i] for i in idx], views, only=lang)
                for i, reading in zip(idx, converted):
                    if self._converted_wins(reading, readings[i]):  # type: ignore[arg-type]
                        readings[i] = reading
        routes = [
            self._decide(r.code, r.confidence, r.veto) if r.accepted else self._rejected(r.code, r.confidence)
            for r in readings  # read as written (no ``only``), every text has one: none is skipped
        ]
        self._fill_best(texts, routes)
        if raise_refused:
            raise_if_refused(routes)
        return routes

    def _decide(self, code: str | None, confidence: float, veto: str | None) -> Detection:
        if veto is not None:
            return self._other(veto, confidence)
        if code is not None and code not in self.languages:
            return self._other(code, confidence)
        if code is not None and confidence >= self.min_confidence:
            return Detection(code, "bundle", confidence, code)
        guess = f"best guess {code} at {confidence:.2f}" if code else "no language recognised"
        if self.unsure == "refuse":
            message = (
                f"language unsure ({guess}, below min_confidence {self.min_confidence}); "
                "pass its language explicitly"
            )
            return Detection(code, "refused", confidence, code, unsure=True, message=message)
        lang = code if self.unsure == "best" and code is not None else self.fallback
        return Detection(lang, "bundle", confidence, code, unsure=True)

    def _rejected(self, code: str | None, confidence: float) -> Detection:
        """A sentence the profiles give to ``code``, an installed language, that is not typical of
        it: no bundle accepts it (``detected`` None), and ``other`` decides."""
        if self.other == "refuse":
            message = (
                f"no installed language accepts it (closest: {code}, whose acceptance test it fails); "
                "pass other='backbone' to encode it without modules, or pass its language explicitly"
            )
            return Detection(None, "refused", confidence, None, message=message)
        if self.other == "best":
            return Detection(None, "bundle", confidence, None)
        return Detection(None, "backbone", confidence, None)

    def _other(self, code: str, confidence: float) -> Detection:
        """A sentence in ``code``, which has no bundle here."""
        if self.other == "refuse":
            message = (
                f"detected language {code!r} is not installed (installed: "
                f"{', '.join(self.languages)}); pass other='backbone' to encode it without modules, "
                "or install it with `modsenc add-language`"
            )
            return Detection(code, "refused", confidence, code, message=message)
        if self.other == "best":  # filled in by _fill_best, once for all such sentences
            return Detection(None, "bundle", confidence, code)
        return Detection(code, "backbone", confidence, code)

    def _fill_best(self, texts: list[str], routes: list[Detection]) -> None:
        """``other="best"``: the most likely installed language of the sentences waiting for one."""
        waiting = [i for i, r in enumerate(routes) if r.route == "bundle" and r.lang is None]
        if not waiting:
            return
        guesses = self.detector.detect([texts[i] for i in waiting], self.languages)
        for i, (code, confidence) in zip(waiting, guesses):
            lang = code if code in self.languages else self.fallback
            routes[i] = Detection(lang, "bundle", confidence, routes[i].detected)


def _has_script_letters(text: str, script: str) -> bool:
    return script in set(map(letter_script, set(text)))  # each distinct character once


def explicit_route(code: str) -> Detection:
    """The route of a sentence whose language the caller gave: its bundle, or ``BACKBONE``."""
    if code == BACKBONE:
        return Detection(None, "backbone", 1.0, None)
    code = check_language_code(code)
    return Detection(code, "bundle", 1.0, code)


def raise_if_refused(routes: Sequence[Detection]) -> None:
    """Raise the error of the first refused sentence, naming it."""
    for i, route in enumerate(routes):
        if route.route == "refused":
            error = UnsureLanguageError if route.unsure else OtherLanguageError
            raise error(route.message, i)
