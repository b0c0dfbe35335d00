"""The public encoder: ``ModularEncoder`` (``modular_encoder``), what ``from_pretrained`` builds
before it (``loading``: options, backbone, router) and ``encode_file``, which is ``modsenc encode``.

    encoder = ModularEncoder.from_pretrained("adapters_zoo", languages=["en", "uz"])
    vectors = encoder.encode(["Hello!", "Salom!"])            # languages detected
"""

from modsenc.encoder.encode_file import encode_file
from modsenc.encoder.loading import check_truncate_dim, languages_to_load
from modsenc.encoder.modular_encoder import ModularEncoder
from modsenc.encoder.results import EMBEDDING_PRECISIONS, MODES, PROMPT_ALIASES
from modsenc.runtimes import RUNTIMES

__all__ = [
    "EMBEDDING_PRECISIONS",
    "MODES",
    "PROMPT_ALIASES",
    "RUNTIMES",
    "ModularEncoder",
    "check_truncate_dim",
    "encode_file",
    "languages_to_load",
]
