"""modsenc compare: a model next to a baseline on held-out translations."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from modsenc.backbone import Backbone
from modsenc.cli import main
from modsenc.data.demo import demo_path
from modsenc.data.specs import load_parallel
from modsenc.eval.bitext import l2_normalise, precision_at_1, xsim_error
from modsenc.eval.compare import compare_on_bitext, format_report
from modsenc.modules.bundle import Zoo

pytestmark = pytest.mark.slow


def test_report_matches_the_metrics_computed_directly(zoo_dir) -> None:
    corpus = load_parallel({"path": demo_path("parallel.tsv"), "rows": [240, 260]})
    backbone_dir = Zoo(zoo_dir).backbone_dir
    report = compare_on_bitext({"bare": backbone_dir, "zoo": zoo_dir}, corpus, "en", "uz", examples=3)
    assert report["n"] == 20 and len(report["examples"]) == 3
    assert report["examples"][0] == (corpus.columns["en"][0], corpus.columns["uz"][0])
    assert report["examples"][-1] == (corpus.columns["en"][19], corpus.columns["uz"][19])
    backbone = Backbone.from_pretrained(backbone_dir).eval()
    en = l2_normalise(backbone.encode(corpus.columns["en"]))
    uz = l2_normalise(backbone.encode(corpus.columns["uz"]))
    bare = report["models"]["bare"]
    assert bare["mining"]["en-uz"]["p@1"] == pytest.approx(precision_at_1(en, uz, corpus.columns["uz"]))
    assert bare["mining"]["uz-en"]["xsim_error"] == pytest.approx(xsim_error(uz, en, corpus.columns["en"]))
    assert bare["translation_cosine"] == pytest.approx(float((en * uz).sum(1).mean()), abs=1e-6)
    assert bare["example_cosines"][1] == pytest.approx(float(en[10] @ uz[10]), abs=1e-6)
    # the zoo routes uz through its modules: other vectors, other numbers
    assert report["models"]["zoo"]["translation_cosine"] != pytest.approx(bare["translation_cosine"])
    text = format_report(report)
    assert "Held-out en-uz retrieval on 20 translation pairs" in text
    assert len(text.splitlines()) == 2 + 2 + 1 + 3  # title, columns, 2 models, "Examples", 3 pairs


def test_cli(zoo_dir) -> None:
    backbone_dir = str(Zoo(zoo_dir).backbone_dir)
    spec = "{path: demo:parallel.tsv, rows: [240, 250]}"
    result = CliRunner().invoke(
        main, ["compare", str(zoo_dir), backbone_dir, "--bitext", spec, "--examples", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "on 10 translation pairs" in result.output and "baseline" in result.output
    bad = CliRunner().invoke(main, ["compare", str(zoo_dir), backbone_dir, "--bitext", spec, "--tgt", "zz"])
    assert bad.exit_code == 1 and "has no 'zz' column" in bad.output
    same = CliRunner().invoke(
        main, ["compare", str(zoo_dir), backbone_dir, "--bitext", spec, "--name", "baseline"]
    )
    assert same.exit_code == 2 and "must differ" in same.output
