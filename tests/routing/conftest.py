from __future__ import annotations

from pathlib import Path

import pytest

from modsenc.training.add_language import run
from tests.modules.conftest import fast_recipe, tiny_backbone_dir  # noqa: F401 - shared fixture

# Sentences written for these tests (not in the demo corpus the bundles were built from).
HELD_OUT = {
    "en": ["The library closes early on Sundays.", "We are planning a trip to the mountains next week."],
    "uz": [
        "Kutubxona yakshanba kunlari erta yopiladi.",
        "Keyingi hafta togʻlarga sayohat qilishni rejalashtiryapmiz.",
    ],
    "kk": ["Кітапхана жексенбі күндері ерте жабылады.", "Келесі аптада тауға саяхат жоспарлап жатырмыз."],
    "de": ["Die Bibliothek schließt sonntags früh.", "Wir planen nächste Woche eine Reise in die Berge."],
}


@pytest.fixture(scope="session")
def zoo_dir(tiny_backbone_dir, tmp_path_factory) -> Path:  # noqa: F811
    """en (pivot, SE), uz (all stages; a GELU CLA so the cross export can merge it), kk (vocab, LA,
    parallel-only CLA with adapters' default ReLU), de (vocab, LA)."""
    root = tmp_path_factory.mktemp("routing_zoo")
    zoo = root / "zoo"
    run("en", fast_recipe(), zoo, backbone_dir=tiny_backbone_dir, work_dir=root / "w-en")
    run("uz", fast_recipe(**{"cla.adapter": "{non_linearity: gelu}"}), zoo, work_dir=root / "w-uz")
    run(
        "kk", fast_recipe(**{"cla.variant": "pl"}), zoo, work_dir=root / "w-kk", stages=["vocab", "la", "cla"]
    )
    run("de", fast_recipe(), zoo, work_dir=root / "w-de", stages=["vocab", "la"])
    return zoo
