"""The acceptance test as a bundle's ``langid.json`` stores it (acceptance.py calibrates it and
applies it; see its docstring). Here, apart from acceptance.py, because langid.py reads the record
when it loads a profile, and acceptance.py builds on langid.py's profiles."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

FORMAT = "modsenc-acceptance/1"
# Only the 3- to 5-grams are scored: letters and pairs are shared by most languages of a script
# and only dilute the difference (Tagalog kept 15% of its sentences under Uzbek's test with all
# orders, 4% with these; Tuvan 27% and 2% under Kyrgyz's).
ORDERS = (3, 4, 5)


@dataclass(frozen=True)
class AcceptanceTest:
    """Accept a text whose mean log-probability per n-gram ``m`` over ``n`` n-grams has
    ``(m - centre) * sqrt(n) >= -slack``."""

    centre: float
    slack: float
    percentile: float
    margin: float
    sentences: int
    orders: tuple[int, ...] = ORDERS
    format: str = FORMAT

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> AcceptanceTest:
        if raw.get("format") != FORMAT:
            raise ValueError(f"acceptance test of format {raw.get('format')!r} (this modsenc reads {FORMAT})")
        fields = ("centre", "slack", "percentile", "margin")
        orders = tuple(int(n) for n in raw["orders"])  # type: ignore[attr-defined]
        return cls(*(float(raw[k]) for k in fields), int(raw["sentences"]), orders)  # type: ignore[arg-type]

    def standardised(self, mean: np.ndarray, count: np.ndarray) -> np.ndarray:
        return (mean - self.centre) * np.sqrt(np.maximum(count, 1))

    def accepts(self, mean: np.ndarray, count: np.ndarray) -> np.ndarray:
        return (count == 0) | (self.standardised(mean, count) >= -self.slack)
