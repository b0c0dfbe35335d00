"""The API's refusals: one JSON error with a one-line message, in OpenAI's shape under ``/v1/``
and text-embeddings-inference's elsewhere, and the checks of request values that raise them."""

from __future__ import annotations

import logging
from typing import Any

from fastapi.responses import JSONResponse

from modsenc.serving.requests import TOKEN_IDS
from modsenc.utils.errors import ModsencError

log = logging.getLogger("modsenc.serving")


class APIError(ModsencError):
    def __init__(
        self,
        status: int,
        message: str,
        kind: str,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param
        self.headers = headers


def printable(message: str) -> str:
    """``message`` with any lone surrogate escaped (``\\ud800``): one echoed from a request (a
    language code, a field name) would make the UTF-8 encoding of the response or log line fail."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def log_refusal(method: str, path: str, status: int, kind: str, message: str) -> None:
    """The one log line of a request refused for the client's fault (no traceback: nothing failed)."""
    log.info("modsenc serve: %s %s refused, %d %s: %s", method, path, status, kind, printable(message))


def error_response(
    path: str, status: int, message: str, kind: str, param: str | None = None, headers: dict | None = None
) -> JSONResponse:
    message = printable(message)
    if path.startswith("/v1/"):
        body: dict[str, Any] = {
            "error": {
                "message": message,
                "type": "invalid_request_error" if status < 500 else "server_error",
                "param": param,
                "code": kind,
            }
        }
    else:
        body = {"error": message, "error_type": kind}
    return JSONResponse(body, status_code=status, headers=headers)


def check_unicode(text: str, where: str, param: str) -> str:
    """``text``, or a 400 naming it when it holds a lone surrogate. JSON's ``"\\ud800"`` escape is
    valid JSON and Python decodes it, but no UTF-8 encoder takes the result: the tokenizer and the
    language detector would fail on it with a 500."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        char = f"U+{ord(text[err.start]):04X}"
        message = f"{where} is not valid Unicode: a lone surrogate {char} at character {err.start}"
        raise APIError(400, message, "invalid_unicode", param) from None
    return text


def check_inputs(raw: Any, max_inputs: int, name: str) -> list[str]:
    """The request's texts, or an :class:`APIError` naming the first bad one."""
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list):
        raise APIError(400, f"{name} must be a string or a list of strings", "invalid_input", name)
    if not texts:
        raise APIError(400, f"{name} is an empty list", "empty_input", name)
    if len(texts) > max_inputs:
        raise APIError(
            413, f"{name} has {len(texts)} texts; at most {max_inputs} per request", "too_many_inputs", name
        )
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            what = TOKEN_IDS if isinstance(text, (int, list)) else "expected a string"
            raise APIError(400, f"{name}[{i}] is {type(text).__name__}: {what}", "invalid_input", name)
        if not text.strip():
            raise APIError(400, f"{name}[{i}] is empty", "empty_input", name)
        check_unicode(text, f"{name}[{i}]", name)
    return texts


def check_dimensions(dimensions: int | None, dimension: int) -> None:
    """``dimensions`` must be 1 to the model's ``dimension`` (400 otherwise)."""
    if dimensions is not None and not 1 <= dimensions <= dimension:
        raise APIError(
            400,
            f"dimensions={dimensions} is out of range: this model returns {dimension}-dimensional "
            f"vectors; ask for 1 to {dimension}",
            "invalid_dimensions",
            "dimensions",
        )
