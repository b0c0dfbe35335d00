"""The vocab kind's files in a bundle: named here, below both the kind and its stage."""

EMBEDDINGS_FILE = "embeddings.safetensors"
TOKENIZER_DIR = "tokenizer"
