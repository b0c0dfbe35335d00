"""`modsenc serve`: an HTTP embedding server (OpenAI and text-embeddings-inference APIs) over a zoo."""
