"""The API's shapes: its endpoints, headers and request bodies (OpenAI's and text-embeddings-inference's)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictInt

ENDPOINTS = (
    "/v1/embeddings", "/v1/models", "/embed", "/", "/tokenize", "/decode", "/embed_all",
    "/health", "/info", "/metrics",
)  # fmt: skip
# The response headers of /embed that carry modsenc's per-text details.
TEI_HEADERS = ("x-modsenc-languages", "x-modsenc-routes", "x-modsenc-truncated", "x-modsenc-tokens")
# Open without an API key: load balancers' and orchestrators' probes carry none, and the answer
# says nothing about the model. /metrics stays behind the key: it shows the languages and the
# traffic, and Prometheus sends a bearer token (`authorization` in a scrape config).
PUBLIC = ("/health",)
# Polled every few seconds by probes and scrapers: their access lines go to DEBUG.
POLLED = ("/health", "/metrics")
# Why token ids among texts are refused: /v1/embeddings decodes ids (OpenAI's cl100k_base, as
# LangChain's OpenAIEmbeddings sends them) only as the whole input (serving/token_ids.py).
TOKEN_IDS = (
    "token ids are decoded only as the whole input (a list of cl100k_base ids, or a list of such "
    "lists, on /v1/embeddings); send text or ids, not both"
)


def endpoint_label(path: str) -> str:
    """The ``endpoint`` label of a request in /metrics: a route, or ``other`` (a bounded set)."""
    if path in ENDPOINTS:
        return path
    return "/v1/models/{id}" if path.startswith("/v1/models/") else "other"


class OpenAIEmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: Any
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: StrictInt | None = None  # the first N dimensions, renormalised (Matryoshka-style)
    user: str | None = None
    # modsenc's own fields
    lang: str | list[str] = "auto"
    mode: Literal["cross", "mono"] = "cross"
    normalize: bool = True  # OpenAI's vectors have unit length
    truncate: bool = True
    prompt_name: str | None = None  # as TEI's


class TEIEmbedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inputs: Any
    normalize: bool = True
    truncate: bool = False  # text-embeddings-inference's default: refuse over-long inputs
    truncation_direction: Literal["Right", "right"] = "Right"  # the packed encoder keeps the start
    # a key of the model's sentence-transformers prompts (e5: query, passage or document) instead of
    # the backbone's own prefix (e5's "query: ")
    prompt_name: str | None = None
    dimensions: StrictInt | None = None
    # modsenc's own fields
    lang: str | list[str] = "auto"
    mode: Literal["cross", "mono"] = "cross"


class TEITokenizeRequest(BaseModel):
    """TEI's ``/tokenize``: the tokens each input is encoded as."""

    model_config = ConfigDict(extra="forbid")

    inputs: Any
    add_special_tokens: bool = True
    prompt_name: str | None = None
    # modsenc's own fields: which language's tokenizer (auto: the one each text is routed to)
    lang: str | list[str] = "auto"
    mode: Literal["cross", "mono"] = "cross"


class TEIDecodeRequest(BaseModel):
    """TEI's ``/decode``: token ids back to text."""

    model_config = ConfigDict(extra="forbid")

    ids: list[StrictInt] | list[list[StrictInt]]
    skip_special_tokens: bool = True
    # modsenc's own: a language with a vocabulary of its own has ids of its own (the language
    # /tokenize names in x-modsenc-languages); default the backbone's tokenizer
    lang: str = "backbone"
    mode: Literal["cross", "mono"] = "cross"


class TEIEmbedAllRequest(BaseModel):
    """TEI's ``/embed_all``: every token's vector of each input, unpooled and not normalised."""

    model_config = ConfigDict(extra="forbid")

    inputs: Any
    truncate: bool = False  # as /embed: refuse over-long inputs
    truncation_direction: Literal["Right", "right"] = "Right"
    prompt_name: str | None = None
    lang: str | list[str] = "auto"
    mode: Literal["cross", "mono"] = "cross"
