"""Each bundle's acceptance test: a sentence enters a bundle only if it is typical of its language.

The n-gram router picks the *most likely* profile, so a language with no profile (Tajik, Tatar,
Somali: most of the world's) always lands on someone's: Tajik on Uzbek's Cyrillic sub-profile,
Tatar on Kazakh or Kyrgyz (issue 48). The acceptance test adds an absolute check beside that
relative one: the sentence's mean log-probability per n-gram under the chosen bundle's own
profile (its own price for unseen n-grams, not the router's shared one, so the score does not
depend on which other languages are installed) must not fall far below what the language's own
held-out sentences score.

"Far below" depends on length: a sentence's mean over ``n`` n-grams varies about as
``1 / sqrt(n)``, so the test is on ``(score - centre) * sqrt(n)``, the standardised shortfall, and
its limit (``slack``) is the ``percentile``-th worst of the bundle's held-out sentences (the
profile's ``sample``, never counted in it), with a margin. Calibrated when ``add-language`` builds
the bundle and stored in its ``langid.json`` (so the manifest's sha256 covers it); a bundle built
before has none, and is calibrated when it loads, from the same held-out sample, with a logged line.

    python -m modsenc.routing.acceptance --zoo adapters_zoo    # calibrate a zoo's bundles in place
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from modsenc.modules.bundle import Zoo, verify_bundle_file
from modsenc.routing.acceptance_record import ORDERS, AcceptanceTest
from modsenc.routing.langid import LANGID_FILE, CharNgramProfile
from modsenc.routing.scoring import ScoringTable

log = logging.getLogger(__name__)

# The share of a language's own held-out sentences the test may turn away, and the margin on top
# (in the same standardised units), measured on the shipped zoo: docs/results/router.md.
PERCENTILE = 0.5
MARGIN = 0.0
CONFIRMED_SLACK = 2.0
MIN_SENTENCES = 30  # fewer held-out sentences calibrate nothing: such a bundle accepts all


class ProfileScorer:
    """Mean log-probability per n-gram of texts under one profile, with its own unseen prices."""

    def __init__(self, profile: CharNgramProfile, orders: Sequence[int] = ORDERS) -> None:
        # a profile written before 1-5-grams (1-3) is scored on what it has
        self.profile, self.orders = profile, tuple(n for n in orders if n in profile.orders) or profile.orders
        self.table = ScoringTable({profile.lang: profile}, shared_unseen=False)

    def score(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(mean log-probability per n-gram, number of n-grams) of each text."""
        results, lengths = self.table.score_texts(texts, self.orders)
        counts = lengths.astype(np.float64)
        means = np.zeros(len(texts))
        for i, result in enumerate(results):
            if result:
                means[i] = result[self.profile.lang][0] / counts[i]
        return means, counts


def calibrate(
    profile: CharNgramProfile,
    texts: Sequence[str] | None = None,
    percentile: float = PERCENTILE,
    margin: float = MARGIN,
) -> AcceptanceTest | None:
    """The acceptance test of ``profile``'s language from held-out ``texts`` (default: the
    profile's own ``sample``); None when there are fewer than ``MIN_SENTENCES``."""
    texts = [t for t in (profile.sample if texts is None else texts) if t.strip()]
    if len(texts) < MIN_SENTENCES:
        return None
    scorer = ProfileScorer(profile)
    means, counts = scorer.score(texts)
    keep = counts > 0
    means, counts = means[keep], counts[keep]
    # the centre weighs each sentence by its n-grams, as the pooled mean of all of them
    centre = float(np.sum(means * counts) / np.sum(counts))
    shortfall = -(means - centre) * np.sqrt(counts)
    slack = float(np.percentile(shortfall, 100 - percentile)) + margin
    return AcceptanceTest(centre, slack, percentile, margin, int(keep.sum()), scorer.orders)


class Acceptance:
    """The installed bundles' acceptance tests, for the router."""

    def __init__(self, profiles: Mapping[str, CharNgramProfile]) -> None:
        self.scorers: dict[str, ProfileScorer] = {}
        self.tests: dict[str, AcceptanceTest] = {}
        for lang, profile in profiles.items():
            test = profile.acceptance
            if test is None:
                test = calibrate(profile)
                if test is None:
                    log.info(
                        "%s: no acceptance test (no held-out sample): the bundle takes what it wins", lang
                    )
                    continue
                log.info(
                    "%s: the bundle's profile has no acceptance test (built before modsenc stored one); "
                    "calibrated now on its %d held-out sentences",
                    lang,
                    test.sentences,
                )
            self.tests[lang] = test
            self.scorers[lang] = ProfileScorer(profile, test.orders)

    def scores(self, texts: Sequence[str], chosen: Sequence[str | None]) -> list[float | None]:
        """Each text's standardised score under its chosen bundle (None: no test for it)."""
        out: list[float | None] = [None] * len(texts)
        for lang, test in self.tests.items():
            idx = [i for i, c in enumerate(chosen) if c == lang]
            if idx:
                means, counts = self.scorers[lang].score([texts[i] for i in idx])
                values = np.where(counts > 0, test.standardised(means, counts), math.inf)
                for i, value in zip(idx, values.tolist()):
                    out[i] = value
        return out

    def accepts(
        self, texts: Sequence[str], chosen: Sequence[str | None], confirmed: Sequence[bool] | None = None
    ) -> list[bool]:
        """Whether each text passes its chosen bundle's test (True when it has none); one another
        language-ID model ``confirmed`` as that language passes with ``CONFIRMED_SLACK`` times the
        slack (lid.176 knows Kazakh news that Kazakh's profile, built from captions and TV news,
        finds atypical; it also calls Kanuri, written with ə, Azerbaijani)."""
        return [passed for passed, _ in self.verdicts(texts, chosen, confirmed)]

    def verdicts(
        self, texts: Sequence[str], chosen: Sequence[str | None], confirmed: Sequence[bool] | None = None
    ) -> list[tuple[bool, float | None]]:
        """``accepts``, beside each text's standardised score (None: no test): the router compares
        two readings of one text by it (Latin Uyghur as written, where Uzbek is nearest, and
        converted to the ug bundle's Cyrillic)."""
        scores = self.scores(texts, chosen)
        confirmed = confirmed or [False] * len(texts)
        return [
            (s is None or c is None or s >= -self.tests[c].slack * (CONFIRMED_SLACK if ok else 1.0), s)
            for s, c, ok in zip(scores, chosen, confirmed)
        ]


def calibrate_zoo(root: str, percentile: float = PERCENTILE, margin: float = MARGIN) -> dict[str, object]:
    """Calibrate every bundle of the zoo at ``root`` on its profile's held-out sample, write the
    test into its ``langid.json`` and the file's new sha256 into its manifest."""
    zoo, done = Zoo(root), {}
    for lang in zoo.languages():
        manifest = zoo.read_manifest(lang)
        path = Path(verify_bundle_file(zoo.bundle_dir(lang), manifest, LANGID_FILE))
        profile = CharNgramProfile.load(path)
        test = calibrate(profile, percentile=percentile, margin=margin)
        if test is None:
            continue
        profile.acceptance = test
        profile.save(path)
        zoo.rehash_bundle(lang, [LANGID_FILE], router={**manifest.router, "acceptance": test.to_dict()})
        done[lang] = test.to_dict()
    return done


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--zoo", required=True)
    parser.add_argument("--percentile", type=float, default=PERCENTILE)
    parser.add_argument("--margin", type=float, default=MARGIN)
    args = parser.parse_args(argv)
    for lang, test in calibrate_zoo(args.zoo, args.percentile, args.margin).items():
        print(lang, test)


if __name__ == "__main__":
    main()
