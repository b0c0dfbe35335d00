"""``vocab``, a language's own tokenizer and embeddings: its module (``kind.py``), settings
(``config.py``), stage (``stage.py``)."""
