"""Helpers shared by the scale tests."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def shift_vectors(path: Path) -> None:
    """Rewrite a shard as valid Parquet, same rows and texts, each vector one row down (the last first)."""
    table = pq.read_table(path)
    vectors = table.column("vector").combine_chunks()
    shifted = pa.concat_arrays([vectors.slice(len(vectors) - 1), vectors.slice(0, len(vectors) - 1)])
    pq.write_table(table.set_column(table.schema.get_field_index("vector"), "vector", shifted), path)
