"""`modsenc serve`: an HTTP embedding server (OpenAI and text-embeddings-inference APIs) over a zoo.

Its web stack is the ``serve`` extra: without it, importing any part of this package is one line
that says so (``modsenc serve`` prints it)."""

from modsenc.utils.extras import require_extra

require_extra(("fastapi", "uvicorn", "prometheus_client"), "serve", "modsenc serve")
