"""Corpus-scale ``encode`` and ``mine`` on Ray (``modsenc scale ...``; ``pip install -e '.[ray]'``).

Only orchestration lives here: reading inputs into shards, a pool of actors that each hold one
``ModularEncoder`` (``modsenc.routing``), the k-NN search sharded over actors, and the margin
scoring of ``modsenc.eval.mining``. Ray is imported on the paths that run it, never on import.
"""
