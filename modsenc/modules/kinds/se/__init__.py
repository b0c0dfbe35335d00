"""``se``, the sentence-encoding adapter: its module (``kind.py``), settings (``config.py``),
stage (``stage.py``)."""
