"""``la``, the language adapter: its module (``kind.py``), settings (``config.py``), stage (``stage.py``)."""
