"""text-embeddings-inference's token routes: ``/tokenize``, ``/decode`` and ``/embed_all``.

A zoo has more than one tokenizer: a language with a vocabulary module of its own tokenises with
it, into ids of its own. So ``/tokenize`` tokenises each input with the tokenizer of the language it
is routed to (``lang``, as on ``/embed``: auto-detected by default) and names those languages in
``x-modsenc-languages``; ``/decode`` takes the language whose ids it is given (default: the
backbone's tokenizer). ``/embed_all`` (every token's vector) is refused with a 501: the runtimes
pool inside the forward pass, so the server has no per-token outputs to give.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from modsenc.routing.router import BACKBONE
from modsenc.serving.errors import APIError, check_inputs
from modsenc.serving.requests import TEIDecodeRequest, TEITokenizeRequest
from modsenc.serving.service import UnknownLanguage, UnknownPrompt
from modsenc.utils.errors import InputError

if TYPE_CHECKING:
    from modsenc.serving.app import ServerState

EMBED_ALL = (
    "/embed_all is not supported: modsenc's runtimes pool each text inside the forward pass and "
    "keep no per-token vectors; use /embed for sentence vectors"
)


def add_token_endpoints(app: FastAPI, state: ServerState) -> None:
    """TEI's ``/tokenize``, ``/decode`` and ``/embed_all``."""

    @app.post("/tokenize")
    async def tokenize(request: Request, body: TEITokenizeRequest) -> JSONResponse:
        service, _ = state.ready()
        texts = check_inputs(body.inputs, state.config.max_inputs, "inputs")
        noted = request.scope.get("modsenc")
        if noted is not None:  # for the access log line (Guard)
            noted["texts"] = len(texts)
        try:
            prompt = service.check_prompt_name(body.prompt_name or state.config.default_prompt_name)
        except UnknownPrompt as err:
            raise APIError(400, str(err), "invalid_prompt_name", "prompt_name") from err
        routes = await state.route(service, texts, body.lang, "inputs")
        langs = [route.bundle or BACKBONE for route in routes]
        tokens: list[list[dict]] = [[] for _ in texts]
        for lang in dict.fromkeys(langs):  # one call per language, in the order first met
            index = [i for i, code in enumerate(langs) if code == lang]
            found = await asyncio.to_thread(
                service.tokens, [texts[i] for i in index], lang, body.mode, prompt, body.add_special_tokens
            )
            for i, row in zip(index, found):
                tokens[i] = row
        return JSONResponse(tokens, headers={"x-modsenc-languages": ",".join(langs)})

    @app.post("/decode")
    async def decode(body: TEIDecodeRequest) -> JSONResponse:
        service, _ = state.ready()
        rows = body.ids if body.ids and isinstance(body.ids[0], list) else [body.ids]
        try:
            lang = service.check_language(body.lang)
        except UnknownLanguage as err:
            raise APIError(400, str(err), "unknown_language", "lang") from err
        try:
            texts = await asyncio.to_thread(service.decode, rows, lang, body.mode, body.skip_special_tokens)
        except InputError as err:
            raise APIError(400, str(err), "invalid_input", "ids") from err
        return JSONResponse(texts)

    @app.post("/embed_all")
    async def embed_all() -> JSONResponse:
        raise APIError(501, EMBED_ALL, "not_supported")
