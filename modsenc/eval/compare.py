"""``modsenc compare``: one model next to a baseline on held-out translations, as a person reads it.

For a bitext (rows the models were not trained on) and one language pair: P@1 and xsim error in
both directions for each model, the mean cosine of translations and of non-translations (the gap is
what retrieval lives on), and a few translation pairs with their cosine under each model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from modsenc.data.readers import ParallelCorpus
from modsenc.data.specs import load_parallel, resolve_data_spec
from modsenc.eval.bitext import bitext_mining, l2_normalise
from modsenc.eval.runner import EncoderSet


def compare_models(
    model: Any,
    baseline: Any,
    bitext: str | Mapping[str, Any],
    src: str = "en",
    tgt: str = "uz",
    examples: int = 4,
    name: str = "modsenc",
    baseline_name: str = "baseline",
    dtype: str = "auto",
) -> dict[str, Any]:
    """``modsenc compare``: ``model`` next to ``baseline`` (zoos, backbone folders or
    sentence-transformers models) on a bitext, a TSV path or ``{path, rows, languages}``
    (``demo:NAME`` names a packaged demo file); the report ``format_report`` prints."""
    if name == baseline_name:
        raise ValueError(f"the model and the baseline need different names, both are {name!r}")
    corpus = load_parallel(resolve_data_spec(bitext))
    return compare_on_bitext({baseline_name: baseline, name: model}, corpus, src, tgt, examples, dtype)


def compare_on_bitext(
    models: dict[str, Any],
    corpus: ParallelCorpus,
    src: str = "en",
    tgt: str = "uz",
    examples: int = 4,
    dtype: str = "auto",
) -> dict[str, Any]:
    """Metrics and example similarities for every model (name -> zoo, backbone dir or encoder),
    each encoding in ``dtype`` (auto: bf16 where native)."""
    for lang in (src, tgt):
        if lang not in corpus.columns:
            raise ValueError(f"{corpus.path} has no {lang!r} column (it has {', '.join(corpus.languages)})")
    rows = [i for i, (a, b) in enumerate(zip(corpus.columns[src], corpus.columns[tgt])) if a and b]
    if len(rows) < 2:
        raise ValueError(f"{corpus.path}: {src}-{tgt} retrieval needs at least 2 rows with both sides")
    columns = {lang: [corpus.columns[lang][i] for i in rows] for lang in (src, tgt)}
    shown = np.linspace(0, len(rows) - 1, num=min(examples, len(rows))).round().astype(int).tolist()
    report: dict[str, Any] = {
        "bitext": corpus.path,
        "pair": f"{src}-{tgt}",
        "n": len(rows),
        "examples": [(columns[src][i], columns[tgt][i]) for i in shown],
        "models": {},
    }
    for name, model in models.items():
        encoders = EncoderSet(model, dtype=dtype)
        vectors = {lang: l2_normalise(encoders.for_language(lang)(columns[lang])) for lang in (src, tgt)}
        cosines = vectors[src] @ vectors[tgt].T
        off_diagonal = ~np.eye(len(rows), dtype=bool)
        mining = bitext_mining(
            columns, {lang: _fixed(vectors[lang]) for lang in (src, tgt)}, [(src, tgt), (tgt, src)]
        )
        report["models"][name] = {
            "model": str(model),
            "mining": mining,
            "translation_cosine": float(np.diag(cosines).mean()),
            "other_cosine": float(cosines[off_diagonal].mean()),
            "example_cosines": [float(cosines[i, i]) for i in shown],
        }
    return report


def _fixed(vectors: np.ndarray):
    return lambda texts: vectors  # already encoded, in the order bitext_mining asks for


def format_report(report: dict[str, Any]) -> str:
    src, tgt = report["pair"].split("-")
    names = list(report["models"])
    width = max(len(n) for n in names) + 2
    lines = [
        f"Held-out {src}-{tgt} retrieval on {report['n']} translation pairs ({report['bitext']}):",
        f"  {'':<{width}}P@1 {src}->{tgt}  P@1 {tgt}->{src}  xsim err {src}->{tgt}  xsim err {tgt}->{src}"
        f"  cos(translations)  cos(others)",
    ]
    for name in names:
        m = report["models"][name]
        fwd, bwd = m["mining"][f"{src}-{tgt}"], m["mining"][f"{tgt}-{src}"]
        lines.append(
            f"  {name:<{width}}{fwd['p@1']:>10.1f}  {bwd['p@1']:>10.1f}  {fwd['xsim_error']:>15.1f}  "
            f"{bwd['xsim_error']:>15.1f}  {m['translation_cosine']:>17.3f}  {m['other_cosine']:>11.3f}"
        )
    lines.append(f"Examples (cosine: {' -> '.join(names)}):")
    for i, (a, b) in enumerate(report["examples"]):
        scores = " -> ".join(f"{report['models'][n]['example_cosines'][i]:.3f}" for n in names)
        lines.append(f"  {scores}   {a}  |  {b}")
    return "\n".join(lines)
