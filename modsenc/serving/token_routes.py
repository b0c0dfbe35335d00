"""text-embeddings-inference's token routes: ``/tokenize``, ``/decode`` and ``/embed_all``.

A zoo has more than one tokenizer: a language with a vocabulary module of its own tokenises with
it, into ids of its own. So ``/tokenize`` tokenises each input with the tokenizer of the language it
is routed to (``lang``, as on ``/embed``: auto-detected by default) and names those languages in
``x-modsenc-languages``; ``/decode`` takes the language whose ids it is given (default: the
backbone's tokenizer). ``/embed_all`` gives every token's last hidden state, through the
language's modules (the torch runtime; the openvino one pools inside its graphs: 501).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from modsenc.routing.router import BACKBONE
from modsenc.serving.errors import APIError, check_inputs
from modsenc.serving.requests import TEIDecodeRequest, TEIEmbedAllRequest, TEITokenizeRequest
from modsenc.serving.service import InputTooLong, UnknownLanguage
from modsenc.utils.errors import InputError

if TYPE_CHECKING:
    from modsenc.serving.state import ServerState


def add_token_endpoints(app: FastAPI, state: ServerState) -> None:
    """TEI's ``/tokenize``, ``/decode`` and ``/embed_all``."""

    @app.post("/tokenize")
    async def tokenize(request: Request, body: TEITokenizeRequest) -> JSONResponse:
        service, _ = state.ready()
        texts = check_inputs(body.inputs, state.config.max_inputs, "inputs")
        noted = request.scope.get("modsenc")
        if noted is not None:  # for the access log line (Guard)
            noted["texts"] = len(texts)
        prompt = state.prompt_of(service, body.prompt_name)
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

    add_embed_all(app, state)


def add_embed_all(app: FastAPI, state: ServerState) -> None:
    """TEI's ``/embed_all``: each input's token vectors, through its language's modules."""

    @app.post("/embed_all")
    async def embed_all(request: Request, body: TEIEmbedAllRequest) -> JSONResponse:
        service, _ = state.ready()
        texts = check_inputs(body.inputs, state.config.max_inputs, "inputs")
        prompt = state.prompt_of(service, body.prompt_name)
        routes = await state.route(service, texts, body.lang, "inputs")
        langs = [route.bundle or BACKBONE for route in routes]
        how = (body.mode, prompt)
        try:
            found = await asyncio.to_thread(service.token_vectors, texts, langs, how, body.truncate)
        except InputTooLong as err:
            message = (
                f"inputs[{err.index}] has more than {err.limit} tokens; shorten it or send truncate=true"
            )
            raise APIError(413, message, "input_too_long", "inputs") from err
        except InputError as err:  # a runtime with no per-token outputs (openvino)
            raise APIError(501, str(err), "not_supported") from err
        return JSONResponse([m.tolist() for m in found], headers={"x-modsenc-languages": ",".join(langs)})
