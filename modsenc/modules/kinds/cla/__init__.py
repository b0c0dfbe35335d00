"""``cla``, the cross-lingual alignment adapter: its module (``kind.py``), settings (``config.py``),
stage (``stage.py``)."""
