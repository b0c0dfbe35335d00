"""The ``vocab`` recipe section: the vocabulary's size and FOCUS's fastText keys."""

from __future__ import annotations

from dataclasses import dataclass

from modsenc.backbone.focus import FocusConfig


@dataclass
class VocabConfig(FocusConfig):
    """``vocab``: a SentencePiece vocabulary for the language, FOCUS-initialised embeddings (the
    fastText keys: ``FocusConfig``, trained on the mono text)."""

    vocab_size: int = 8000
