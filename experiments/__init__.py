"""The experiments behind docs/results/, each a module run from the repository root:
``python -m experiments.NAME``.

A script imports what it shares with others from ``experiments.common`` (which builds on
``bench.common``), never another script; no script changes ``sys.path`` (tests/test_code_shape.py
checks both, and the size limits)."""
