"""``modsenc eval``: run the metrics on any encoder and write JSON, Markdown and a heatmap.

An encoder is a zoo (``ModularEncoder``: each language through its own modules), a backbone
directory (the bare backbone for every language), a sentence-transformers model directory or hub
name, or any object with a sentence-transformers-style ``encode``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from modsenc.backbone.precision import autocast, check_precision, resolve_precision
from modsenc.backbone.quantization import check_quantization, quantize_linears
from modsenc.data.errors import DataFormatError
from modsenc.data.specs import load_parallel
from modsenc.eval.bitext import bitext_mining
from modsenc.eval.similarity import language_bias
from modsenc.eval.sts import load_sts, row_cosines, spearman_x100
from modsenc.utils.errors import MissingDependencyError
from modsenc.utils.hub import check_model_source
from modsenc.utils.io import atomic_file, atomic_write_json, atomic_write_text

EncodeFn = Callable[[Sequence[str]], np.ndarray]


class EncoderSet:
    """``encoder.for_language(lang)`` -> a function from texts to an (n, dim) float32 array.

    ``route`` sends every language of a zoo through one language's modules: ``route="en"`` is the
    modular paper's Mod_en baseline (the English SE adapter shared by all languages).
    """

    def __init__(
        self,
        model: Any,
        mode: str = "cross",
        batch_size: int = 64,
        route: str | None = None,
        quantize: str | None = None,
        dtype: str = "auto",
        runtime: str = "auto",
    ) -> None:
        self.mode, self.batch_size = mode, batch_size
        self.kind, self.model = self._load(
            model, check_quantization(quantize), check_precision(dtype), runtime
        )
        # A zoo applies its precision itself; other models are autocast around their encode().
        device = getattr(self.model, "device", "cpu")
        self.device = device if isinstance(device, torch.device) else torch.device(str(device))
        self.precision = getattr(self.model, "precision", None) or resolve_precision(dtype, self.device)
        if route is not None:
            if self.kind != "zoo":
                raise ValueError(f"route={route!r} needs a zoo; {model} is a {self.kind}")
            if route not in self.model.installed:
                raise ValueError(
                    f"route={route!r}: not installed in {model} ({', '.join(self.model.installed)})"
                )
        self.route = route

    @staticmethod
    def _load(
        model: Any, quantize: str | None = None, dtype: str = "auto", runtime: str = "auto"
    ) -> tuple[str, Any]:
        if not isinstance(model, (str, os.PathLike)):
            if not hasattr(model, "encode"):
                raise TypeError(f"{type(model).__name__} has no encode(); pass a path or an encoder")
            if quantize is not None:
                raise ValueError("quantize needs a model path; quantise an encoder object before passing it")
            return "object", model
        path = Path(model)
        if (path / "index.json").exists():
            from modsenc.encoder import ModularEncoder  # noqa: PLC0415

            return "zoo", ModularEncoder.from_pretrained(
                path, quantize=quantize, dtype=dtype, runtime=runtime
            )
        if runtime not in ("torch", "auto"):  # a backbone or another model runs on torch
            raise ValueError(f"runtime={runtime!r} is a zoo's option; {model} is not a zoo")
        if (path / "modsenc_backbone.json").exists():
            from modsenc.backbone import Backbone  # noqa: PLC0415

            backbone = Backbone.from_pretrained(path).eval()
            return "backbone", quantize_linears(backbone, quantize) if quantize else backbone
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415

        check_model_source(str(model))  # a mistyped folder: "no such folder", never a hub look-up
        if path.is_dir() and not any((path / name).is_file() for name in ("modules.json", "config.json")):
            raise FileNotFoundError(
                f"{model} is not a model folder: no index.json (a zoo), modsenc_backbone.json (a backbone), "
                "modules.json or config.json (a sentence-transformers or Hugging Face model)"
            )
        st_model = SentenceTransformer(str(model)).eval()
        return "sentence-transformers", quantize_linears(st_model, quantize) if quantize else st_model

    def for_language(self, lang: str) -> EncodeFn:
        if self.kind == "zoo":
            route = self.route or (lang if lang in self.model.installed else "auto")
            return lambda texts: self.model.encode(
                list(texts), lang=route, batch_size=self.batch_size, mode=self.mode
            )

        def encode(texts: Any) -> np.ndarray:
            with autocast(self.device, self.precision):
                vectors = self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True)
            return np.asarray(vectors, dtype=np.float32)

        return encode


class MTEBEncoder:
    """Adapter to MTEB's encoder protocol: ``encode(sentences, *, task_name, prompt_type, **kw)``.

    ``mteb.evaluate(MTEBEncoder(ModularEncoder.from_pretrained(zoo)), tasks)``. Languages are
    detected per sentence unless ``lang`` is given; ``mode`` picks the CLA use as in ``encode``.
    """

    def __init__(self, encoder: Any, lang: str | None = None, mode: str = "cross") -> None:
        self.encoder, self.lang, self.mode = encoder, lang, mode

    def encode(self, sentences: Sequence[str], **kwargs: Any) -> np.ndarray:
        batch_size = int(kwargs.get("batch_size", 32))
        if hasattr(self.encoder, "router"):  # a ModularEncoder
            return self.encoder.encode(list(sentences), lang=self.lang, batch_size=batch_size, mode=self.mode)
        return np.asarray(self.encoder.encode(list(sentences), batch_size=batch_size))


def evaluate(
    model: Any,
    bitext: Sequence[str | os.PathLike | dict] = (),
    sts: Sequence[str | os.PathLike | dict] = (),
    pivot: str = "en",
    mode: str = "cross",
    route: str | None = None,
    quantize: str | None = None,
    dtype: str = "auto",
    runtime: str = "auto",
) -> dict[str, Any]:
    # Every input is read (and its errors reported) before the model loads.
    corpora = []
    for spec in bitext:
        corpus = load_parallel(spec)  # a TSV path, or {"hf": name, "split": ..., ...} for datasets
        if len(corpus.languages) < 2 or (pivot is not None and pivot not in corpus.languages):
            raise DataFormatError(
                corpus.path,
                None,
                f"has the language columns {corpus.languages}; bitext mining needs the pivot {pivot!r} "
                "and at least one other language (one tab-separated column per language)",
            )
        corpora.append((Path(spec).name if isinstance(spec, (str, os.PathLike)) else corpus.path, corpus))
    sts_sets = [(_sts_name(spec), load_sts(spec)) for spec in sts]
    encoders = EncoderSet(model, mode=mode, route=route, quantize=quantize, dtype=dtype, runtime=runtime)
    results: dict[str, Any] = {"model": str(model), "mode": mode, "bitext": {}, "sts": {}}
    results |= {"precision": encoders.precision, "runtime": runtime}
    if route is not None:
        results["route"] = route
    if quantize is not None:
        results["quantize"] = quantize
    results["precision"] = encoders.precision
    for name, corpus in corpora:
        fns = {lang: encoders.for_language(lang) for lang in corpus.languages}
        results["bitext"][name] = bitext_mining(corpus.columns, fns, pivot=pivot)
    for path, pairs in sts_sets:
        groups: dict[tuple[str, str], list] = {}
        for pair in pairs:
            groups.setdefault((pair.lang1, pair.lang2), []).append(pair)
        scores: dict[str, float] = {}
        bilingual: dict[str, tuple[np.ndarray, list[float]]] = {}
        for (l1, l2), group in groups.items():
            a = encoders.for_language(l1)([p.sentence1 for p in group])
            b = encoders.for_language(l2)([p.sentence2 for p in group])
            gold = [p.score for p in group]
            scores[f"{l1}-{l2}"] = spearman_x100(a, b, gold)
            if l1 != l2:
                bilingual[f"{l1}-{l2}"] = (row_cosines(a, b), gold)
        entry: dict[str, Any] = {"spearman": scores}
        if len(bilingual) >= 2:
            entry["language_bias"] = language_bias(bilingual)
        results["sts"][path] = entry
    return results


def _sts_name(spec: str | os.PathLike | dict) -> str:
    """An STS set's name in the results: its file name, with the part when one is chosen."""
    if isinstance(spec, dict):
        name = Path(spec["path"]).name
        return f"{name}[{spec['split']}]" if spec.get("split") else name
    return Path(spec).name


def markdown(results: dict[str, Any]) -> str:
    lines = [f"# modsenc eval: {results['model']} (mode {results['mode']})"]
    for name, pairs in results["bitext"].items():
        lines += [
            f"\n## Bitext mining: {name}\n",
            "| pair | xsim error % | P@1 % | n |",
            "|---|---:|---:|---:|",
        ]
        lines += [f"| {p} | {m['xsim_error']:.2f} | {m['p@1']:.2f} | {m['n']} |" for p, m in pairs.items()]
    for name, entry in results["sts"].items():
        lines += [f"\n## STS: {name}\n", "| pair | Spearman x100 |", "|---|---:|"]
        lines += [f"| {p} | {v:.1f} |" for p, v in entry["spearman"].items()]
        if "language_bias" in entry:
            bias = entry["language_bias"]
            lines.append(
                f"\nLanguage bias: {bias['bias']:.1f} "
                f"(average {bias['average']:.1f}, pooled {bias['pooled']:.1f})"
            )
    return "\n".join(lines) + "\n"


def pyplot() -> Any:
    """matplotlib's pyplot drawing off screen (Agg), or an error naming the extra to install:
    matplotlib is the ``eval`` extra, needed for the heatmap alone."""
    try:
        import matplotlib  # noqa: PLC0415
    except ImportError as err:
        raise MissingDependencyError(
            "the --heatmap needs matplotlib: pip install -e '.[eval]' (or pip install matplotlib)"
        ) from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def heatmap(results: dict[str, Any], path: str | os.PathLike) -> None:
    """xsim error per (source, target) pair of the first bitext file, as a PNG."""
    plt = pyplot()
    name, pairs = next(iter(results["bitext"].items()))
    langs = sorted({x for p in pairs for x in p.split("-")})
    grid = np.full((len(langs), len(langs)), np.nan)
    for pair, metrics in pairs.items():
        a, b = pair.split("-")
        grid[langs.index(a), langs.index(b)] = metrics["xsim_error"]
    fig, ax = plt.subplots(figsize=(1 + 0.6 * len(langs), 1 + 0.5 * len(langs)))
    image = ax.imshow(grid, cmap="viridis_r", vmin=0, vmax=100)
    ax.set_xticks(range(len(langs)), langs)
    ax.set_yticks(range(len(langs)), langs)
    ax.set_xlabel("target")
    ax.set_ylabel("source")
    for i in range(len(langs)):
        for j in range(len(langs)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", color="white", fontsize=8)
    ax.set_title(f"xsim error % ({name})")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    with atomic_file(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")  # the temporary's name has no .png to infer it from
    plt.close(fig)


def write_reports(results: dict[str, Any], json_path=None, markdown_path=None, heatmap_path=None) -> None:
    if json_path:
        atomic_write_json(json_path, results)
    if markdown_path:
        atomic_write_text(markdown_path, markdown(results))
    if heatmap_path and results["bitext"]:
        heatmap(results, heatmap_path)


def dumps(results: dict[str, Any]) -> str:
    return json.dumps(results, indent=2)
