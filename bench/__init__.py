"""The maintained benchmarks, each a module run from the repository root: ``python -m bench.NAME``.

A script imports what it shares with others from ``bench.common`` (never another script); no
script changes ``sys.path`` (tests/test_code_shape.py checks both, and the size limits)."""
