"""``modsenc scale mine``: LASER margin mining between two ``scale encode`` outputs, search sharded on Ray.

For each direction (source -> target, then target -> source) the database side's shards are cut
into parts of at most ``part_rows`` rows. Each part is held by one Ray actor (:class:`SearchPart`)
with its own faiss index: exact inner product up to ``exact_limit`` database rows, above it an
inverted file (``IVF{nlist},Flat``, ``nlist = 4 sqrt(n)`` as in ``modsenc.eval.mining``) and above
``pq_limit`` an IVF-PQ (``IVF{nlist},PQ{dim/8}``: 8-bit codes, dim/8 bytes per vector). The coarse
quantiser (and PQ codebooks) are trained once, in the driver, on a sample of the database, so every
part shares them and the merged per-part top-k equals what one index over the whole database
with the same ``nprobe`` returns. At most ``workers`` parts are searched at a time (waves); the
queries stream through them in chunks of ``chunk_rows`` and the running top-k is merged in the
driver into memory-mapped arrays.

The margin (each row's mean similarity to its k neighbours, the ratio margin of the best
neighbour) and the one-to-one selection are ``modsenc.eval.mining``'s functions, run over those
arrays; pairs are written as ``score<TAB>src<TAB>tgt``, best first, like ``modsenc mine``; with ids
(``ids``: by default when a side was encoded with ``--id-column``) as
``score<TAB>src_id<TAB>tgt_id<TAB>src_text<TAB>tgt_text``, each id its row's ``input_id``, else its
row position over the inputs (the shard's ``id``).

One mixed ``scale encode`` output mines too: ``src_lang``/``tgt_lang`` keep only the rows whose
``lang`` column (given by ``--lang``/``--lang-field`` or detected by the router) is that language,
on each side, and every read (search parts, query chunks, samples, texts) applies the same filter.

Memory: a search actor holds one part (``part_rows x dim x 4`` bytes flat or IVF-Flat,
``part_rows x (dim/8 + 8)`` bytes IVF-PQ) and one query chunk; the driver holds the training sample
(up to ``64 nlist`` rows), one query chunk with its results, and the per-row neighbour means
(4 bytes per sentence per side); the k-NN lists (12 k bytes per sentence) are memory-mapped files.
No process holds either embedding matrix.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from modsenc.eval.bitext import l2_normalise
from modsenc.eval.mining import MinedPair, best_by_margin, neighbour_means, select_pairs, write_pairs
from modsenc.scale.cluster import ray_session
from modsenc.scale.output import INPUT_ID, JOB_KIND, MANIFEST, verify_shards
from modsenc.utils.io import atomic_write_text
from modsenc.utils.outputs import check_output_location

log = logging.getLogger(__name__)


@dataclass
class Embeddings:
    """One ``scale encode`` output: its shard files and their row counts (rows in shard order); with
    ``lang``, only the rows of that language (``rows`` counts those)."""

    root: Path
    files: list[Path]
    rows: list[int]
    dim: int
    lang: str | None = None
    input_ids: bool = False  # the shards carry an input_id column (--id-column)

    @property
    def total(self) -> int:
        return sum(self.rows)

    @classmethod
    def open(cls, path: str | os.PathLike, what: str, lang: str | None = None) -> Embeddings:
        root = Path(path)
        manifest_path = root / MANIFEST
        if not manifest_path.is_file():
            raise FileNotFoundError(
                f"{what} {path}: no {MANIFEST}; give a folder written by `modsenc scale encode`"
            )
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            kind = manifest["job"]["kind"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(f"{manifest_path}: not a modsenc scale encode manifest ({err})") from None
        if kind != JOB_KIND:
            raise ValueError(f"{manifest_path}: a {kind} job, not a scale encode output")
        if manifest.get("status") != "complete":
            raise ValueError(f"{what} {path}: the encode job did not finish; rerun it with --resume first")
        files = [root / name for name in manifest["shard_files"]]
        for file in files:
            if not file.is_file():
                raise FileNotFoundError(f"{what} {path}: shard {file} is missing")
        if manifest["encoded"] == 0:
            raise ValueError(f"{what} {path}: no rows were encoded (all rejected?); nothing to mine")
        if "shard_sha256" in manifest:  # before any search: a changed shard would pair the wrong rows
            verify_shards(files, manifest["shard_sha256"], f"{what} {path}")
        else:
            # Written by a modsenc older than shard hashes: refusing would force re-encoding a whole
            # corpus that was fine when written, so it is mined as before, with a warning.
            log.warning(
                "%s %s: the manifest records no shard sha256 (an older modsenc wrote it); its shards "
                "are used unverified (encode it again to have them checked)",
                what,
                path,
            )
        found = cls(root, files, list(manifest["shard_rows"]), int(manifest["dim"]))
        found.input_ids = INPUT_ID in found.schema_names()
        return found.select(lang, what, path) if lang is not None else found

    def schema_names(self) -> list[str]:
        import pyarrow.parquet as pq  # noqa: PLC0415

        return pq.ParquetFile(self.files[0]).schema_arrow.names

    def select(self, lang: str, what: str, path: str | os.PathLike) -> Embeddings:
        """Only the rows whose ``lang`` is ``lang``: the row counts per shard from its lang column."""
        import pyarrow.compute as pc  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        rows, present = [], set()
        for file in self.files:
            column = pq.read_table(file, columns=["lang"]).column("lang")
            rows.append(int(pc.sum(pc.equal(column, lang)).as_py() or 0))
            present.update(v for v in pc.unique(column).to_pylist() if v is not None)
        if sum(rows) == 0:
            raise ValueError(
                f"{what} {path}: no rows of language {lang!r}; languages there: {', '.join(sorted(present))}"
            )
        return Embeddings(self.root, self.files, rows, self.dim, lang, self.input_ids)

    def read(self, file: Path, column: str = "vector") -> Any:
        """One column of a shard (its rows of ``lang`` only, when set)."""
        import pyarrow.compute as pc  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        if self.lang is None:
            return pq.read_table(file, columns=[column]).column(column)
        table = pq.read_table(file, columns=list(dict.fromkeys([column, "lang"])))
        return table.filter(pc.equal(table.column("lang"), self.lang)).column(column)

    def vectors(self, file: Path) -> np.ndarray:
        column = self.read(file).combine_chunks()
        flat = column.values.to_numpy(zero_copy_only=False)
        return np.asarray(flat, dtype=np.float32).reshape(-1, self.dim)

    def chunks(self, rows: int) -> Iterator[tuple[int, np.ndarray]]:
        """(first position, L2-normalised float32 vectors) in chunks of about ``rows`` rows."""
        start, pending, size = 0, [], 0
        for file, n in zip(self.files, self.rows):
            if n == 0:
                continue
            pending.append(self.vectors(file))
            size += n
            if size >= rows:
                block = np.concatenate(pending)
                yield start, l2_normalise(block)
                start, pending, size = start + len(block), [], 0
        if pending:
            yield start, l2_normalise(np.concatenate(pending))

    def parts(self, part_rows: int) -> list[tuple[int, list[str]]]:
        """Consecutive shard groups of at most ``part_rows`` rows (a larger shard is a part alone):
        (first position, files)."""
        parts: list[tuple[int, list[str]]] = []
        start, files, size = 0, [], 0
        for file, n in zip(self.files, self.rows):
            if n == 0:
                continue
            if files and size + n > part_rows:
                parts.append((start, files))
                start, files, size = start + size, [], 0
            files.append(str(file))
            size += n
        if files:
            parts.append((start, files))
        return parts

    def sample(self, size: int, seed: int) -> np.ndarray:
        """``size`` rows drawn uniformly without replacement, read shard by shard."""
        chosen = np.sort(np.random.default_rng(seed).choice(self.total, size=size, replace=False))
        out, first = [], 0
        for file, n in zip(self.files, self.rows):
            lo, hi = np.searchsorted(chosen, [first, first + n])
            if hi > lo:
                out.append(self.vectors(file)[chosen[lo:hi] - first])
            first += n
        return l2_normalise(np.concatenate(out))

    def texts(self, positions: set[int], column: str = "text") -> dict[int, str]:
        """``column`` (as text) of the rows at ``positions``, reading only the shards that hold them."""
        wanted, out, first = np.sort(np.fromiter(positions, dtype=np.int64)), {}, 0
        for file, n in zip(self.files, self.rows):
            lo, hi = np.searchsorted(wanted, [first, first + n])
            if hi > lo:
                values = self.read(file, column).to_pylist()
                out.update({int(p): str(values[p - first]) for p in wanted[lo:hi]})
            first += n
        return out

    def ids(self, positions: set[int]) -> dict[int, str]:
        """Each row's ``input_id`` (``--id-column``), or else its position over the inputs (``id``)."""
        return self.texts(positions, INPUT_ID if self.input_ids else "id")


def index_spec(n: int, dim: int, exact_limit: int, pq_limit: int) -> str:
    """faiss index_factory string for a database of ``n`` rows (see the module docstring)."""
    if n <= exact_limit:
        return "Flat"
    nlist = int(4 * math.sqrt(n))
    if n > pq_limit:
        m = dim // 8 if dim % 8 == 0 else next(d for d in range(min(dim, 64), 0, -1) if dim % d == 0)
        return f"IVF{nlist},PQ{m}"
    return f"IVF{nlist},Flat"


class SearchPart:
    """A Ray actor holding one part of the database at a time, in its own faiss index (a copy of the
    trained template). Actors are reused from part to part: starting a process costs seconds."""

    def __init__(self) -> None:
        self.index: Any = None
        self.start = 0

    def load(
        self, files: list[str], start: int, dim: int, template: Any, nprobe: int, lang: str | None = None
    ) -> int:
        import faiss  # noqa: PLC0415

        self.index = None  # free the previous part before reading the next
        embeddings = Embeddings(Path("."), [Path(f) for f in files], [], dim, lang)
        vectors = l2_normalise(np.concatenate([embeddings.vectors(Path(f)) for f in files]))
        if template is None:
            index = faiss.IndexFlatIP(dim)
        else:
            index = faiss.deserialize_index(template)
            faiss.extract_index_ivf(index).nprobe = nprobe
        index.add(vectors)
        self.index, self.start = index, start
        return len(vectors)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        sims, ids = self.index.search(queries, k)
        return sims, np.where(ids >= 0, ids + self.start, -1)

    def peak_rss_mb(self) -> float:
        import resource  # noqa: PLC0415

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def merge_topk(sims: list[np.ndarray], ids: list[np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of several per-part neighbour lists of the same queries (missing ones last)."""
    all_sims, all_ids = np.concatenate(sims, axis=1), np.concatenate(ids, axis=1)
    all_sims = np.where(all_ids >= 0, all_sims, -np.inf)
    order = np.argsort(-all_sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(all_sims, order, axis=1), np.take_along_axis(all_ids, order, axis=1)


def sharded_knn(
    ray: Any,
    actors: list[Any],
    queries: Embeddings,
    database: Embeddings,
    k: int,
    out_sims: np.ndarray,
    out_ids: np.ndarray,
    part_rows: int,
    chunk_rows: int,
    exact_limit: int,
    pq_limit: int,
    nprobe: int,
    seed: int,
    desc: str,
) -> str:
    """Fill ``out_sims``/``out_ids`` (queries x k) with each query's k nearest database rows; returns
    the index kind."""

    spec = index_spec(database.total, database.dim, exact_limit, pq_limit)
    template = None if spec == "Flat" else _trained_template(database, spec, seed, desc)
    out_sims.fill(-np.inf)
    out_ids.fill(-1)
    parts = database.parts(part_rows)
    template_ref = ray.put(template) if template is not None else None
    for wave in range(0, len(parts), len(actors)):
        group = parts[wave : wave + len(actors)]
        started = time.perf_counter()
        busy = actors[: len(group)]
        ray.get(
            [
                a.load.remote(files, start, database.dim, template_ref, nprobe, database.lang)
                for a, (start, files) in zip(busy, group)
            ]
        )
        for first, block in queries.chunks(chunk_rows):
            block_ref = ray.put(block)
            results = ray.get([a.search.remote(block_ref, k) for a in busy])
            rows = slice(first, first + len(block))
            sims, ids = merge_topk(
                [out_sims[rows]] + [r[0] for r in results], [out_ids[rows]] + [r[1] for r in results], k
            )
            out_sims[rows], out_ids[rows] = sims, ids
        log.info(
            "%s: parts %d-%d of %d searched in %.1f s",
            desc,
            wave + 1,
            wave + len(group),
            len(parts),
            time.perf_counter() - started,
        )
    return spec


def _trained_template(database: Embeddings, spec: str, seed: int, desc: str) -> Any:
    """An empty IVF index of ``spec`` trained on a sample of ``database`` (64 rows per cell), serialised
    for every search actor to copy."""
    import faiss  # noqa: PLC0415

    nlist = int(spec.split(",")[0].removeprefix("IVF"))
    sample = database.sample(min(database.total, 64 * nlist), seed)
    trained = faiss.index_factory(database.dim, spec, faiss.METRIC_INNER_PRODUCT)
    started = time.perf_counter()
    trained.train(sample)
    log.info("%s: %s trained on %d rows in %.1f s", desc, spec, len(sample), time.perf_counter() - started)
    return faiss.serialize_index(trained)


def _means(sims: np.ndarray, ids: np.ndarray, chunk_rows: int) -> np.ndarray:
    """``neighbour_means`` a chunk at a time (the lists are memory-mapped and may exceed memory)."""
    out = np.empty(len(sims), dtype=np.float32)
    for start in range(0, len(sims), chunk_rows):
        out[start : start + chunk_rows] = neighbour_means(
            sims[start : start + chunk_rows], ids[start : start + chunk_rows]
        )
    return out


def _open_pair(
    src_dir: str | os.PathLike,
    tgt_dir: str | os.PathLike | None,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
) -> tuple[Embeddings, Embeddings]:
    """The two sides to mine, checked to come from one model (same dimension). ``tgt_dir`` None: both
    sides are rows of ``src_dir``, ``src_lang``'s and ``tgt_lang``'s (a mixed set)."""
    if tgt_dir is None:
        if src_lang is None or tgt_lang is None:
            raise ValueError("one folder (no TGT) is mined with --src-lang and --tgt-lang: give both, or TGT")
        if src_lang == tgt_lang:
            raise ValueError(
                f"--src-lang and --tgt-lang are both {src_lang}: every row would pair with itself"
            )
        tgt_dir = src_dir
    src, tgt = Embeddings.open(src_dir, "SRC", src_lang), Embeddings.open(tgt_dir, "TGT", tgt_lang)
    if src.dim != tgt.dim:
        raise ValueError(
            f"SRC {src_dir} has {src.dim}-dimensional vectors, TGT {tgt_dir} {tgt.dim}: not one model"
        )
    return src, tgt


def _prepare_output(output: str | os.PathLike, inputs: tuple[str | os.PathLike, ...]) -> Path:
    """The pairs file's path, refused when it is a folder, an input or inside one (a ``scale
    encode`` folder) or inside a zoo, with its parent folder created."""
    output = Path(output)
    if output.is_dir():
        raise ValueError(f"--output {output} is a folder; give a file name for the pairs (TSV)")
    check_output_location(output, "--output", inputs=inputs)
    output.parent.mkdir(parents=True, exist_ok=True)
    return output


def write_id_pairs(path: Path, pairs: list[MinedPair], src: Embeddings, tgt: Embeddings) -> None:
    """``score<TAB>src_id<TAB>tgt_id<TAB>src_text<TAB>tgt_text`` lines, best first, written atomically
    (``Embeddings.ids``: the ``--id-column`` values, else the row positions over the inputs)."""
    src_rows, tgt_rows = {p.src for p in pairs}, {p.tgt for p in pairs}
    src_ids, tgt_ids = src.ids(src_rows), tgt.ids(tgt_rows)
    src_texts, tgt_texts = src.texts(src_rows), tgt.texts(tgt_rows)
    lines = [
        f"{p.score:.6f}\t{src_ids[p.src]}\t{tgt_ids[p.tgt]}\t{src_texts[p.src]}\t{tgt_texts[p.tgt]}\n"
        for p in pairs
    ]
    atomic_write_text(path, "".join(lines))


def _knn_lists(scratch: Path, name: str, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Memory-mapped (n x k) similarity and id arrays for one direction's k-NN lists."""
    sims = np.lib.format.open_memmap(scratch / f"{name}-sims.npy", "w+", np.float32, (n, k))
    ids = np.lib.format.open_memmap(scratch / f"{name}-ids.npy", "w+", np.int64, (n, k))
    return sims, ids


def _margin_candidates(
    fwd_sims: np.ndarray,
    fwd_ids: np.ndarray,
    bwd_sims: np.ndarray,
    bwd_ids: np.ndarray,
    chunk_rows: int,
    threshold: float | None,
) -> np.ndarray:
    """Every row's best neighbour by ratio margin, both directions, as (score, src, tgt) rows,
    scored a chunk at a time from the k-NN lists."""
    src_mean, tgt_mean = _means(fwd_sims, fwd_ids, chunk_rows), _means(bwd_sims, bwd_ids, chunk_rows)
    candidates = []
    for sims, ids, own, other, forward in (
        (fwd_sims, fwd_ids, src_mean, tgt_mean, True),
        (bwd_sims, bwd_ids, tgt_mean, src_mean, False),
    ):
        for start in range(0, len(sims), chunk_rows):
            rows = slice(start, start + chunk_rows)
            best, score = best_by_margin(sims[rows], ids[rows], own[rows], other)
            here = np.arange(start, start + len(best))
            block = np.stack([score, here, best] if forward else [score, best, here], axis=1)
            # Below the threshold a candidate can never be selected: drop it now to bound memory.
            candidates.append(block if threshold is None else block[block[:, 0] >= threshold])
    return np.concatenate(candidates)


def mine_corpus(
    src_dir: str | os.PathLike,
    tgt_dir: str | os.PathLike | None,
    output: str | os.PathLike,
    k: int = 4,
    threshold: float | None = None,
    workers: int = 1,
    address: str | None = None,
    part_rows: int = 2_000_000,
    chunk_rows: int = 16384,
    exact_limit: int = 200_000,
    pq_limit: int = 20_000_000,
    nprobe: int = 16,
    seed: int = 0,
    stats: dict[str, Any] | None = None,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    ids: bool | None = None,
) -> list[MinedPair]:
    """Mine ``src_dir`` x ``tgt_dir`` (two ``scale encode`` outputs) into the TSV ``output``; with
    ``tgt_dir`` None, the ``src_lang`` rows of ``src_dir`` x its ``tgt_lang`` rows (each side may
    also be filtered to a language when both folders are given).

    ``ids``: write ``score src_id tgt_id src_text tgt_text`` (None: when a side carries
    ``--id-column`` values; False: ``score src_text tgt_text`` as ``modsenc mine``). ``stats``, when
    given, receives the index kinds, the search and scoring times and the peak resident memory of
    the search actors (for ``bench/scale.py``)."""
    if workers < 1 or part_rows < 1 or chunk_rows < 1 or k < 1:
        raise ValueError("--workers, --part-rows, --chunk-rows and --k must be at least 1")
    src, tgt = _open_pair(src_dir, tgt_dir, src_lang, tgt_lang)
    output = _prepare_output(output, (src_dir,) if tgt_dir is None else (src_dir, tgt_dir))
    k = min(k, src.total, tgt.total)
    options = {
        "part_rows": part_rows,
        "chunk_rows": chunk_rows,
        "exact_limit": exact_limit,
        "pq_limit": pq_limit,
        "nprobe": nprobe,
        "seed": seed,
    }
    # The k-NN lists are memory-mapped in a scratch folder next to the output, removed at the end.
    with tempfile.TemporaryDirectory(prefix=".modsenc-mine-", dir=output.parent) as scratch:
        fwd_sims, fwd_ids = _knn_lists(Path(scratch), "fwd", src.total, k)
        bwd_sims, bwd_ids = _knn_lists(Path(scratch), "bwd", tgt.total, k)
        _search_both(src, tgt, k, (fwd_sims, fwd_ids, bwd_sims, bwd_ids), workers, address, options, stats)
        candidates = _margin_candidates(fwd_sims, fwd_ids, bwd_sims, bwd_ids, chunk_rows, threshold)
        pairs = select_pairs(candidates, src.total, tgt.total, threshold)
        if stats is not None:
            stats["fwd_ids"] = np.array(fwd_ids[:, 0])  # top-1 neighbours, for recall against exact search
    if ids or (ids is None and (src.input_ids or tgt.input_ids)):
        write_id_pairs(output, pairs, src, tgt)
    else:
        write_pairs(output, pairs, src.texts({p.src for p in pairs}), tgt.texts({p.tgt for p in pairs}))
    return pairs


def _search_both(
    src: Embeddings,
    tgt: Embeddings,
    k: int,
    lists: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    workers: int,
    address: str | None,
    options: dict[str, Any],
    stats: dict[str, Any] | None,
) -> None:
    """Fill the k-NN ``lists`` (forward sims and ids, backward sims and ids) on a pool of search actors;
    log the search time and the actors' peak memory (and record them in ``stats`` when given)."""
    fwd_sims, fwd_ids, bwd_sims, bwd_ids = lists
    part_rows = options["part_rows"]
    with ray_session(address, local_cpus=max(os.cpu_count() or 1, workers)) as ray:
        most = max(len(src.parts(part_rows)), len(tgt.parts(part_rows)))
        actors = [ray.remote(num_cpus=1)(SearchPart).remote() for _ in range(min(workers, most))]
        try:
            started = time.perf_counter()
            kinds = [
                sharded_knn(ray, actors, src, tgt, k, fwd_sims, fwd_ids, desc="search src->tgt", **options),
                sharded_knn(ray, actors, tgt, src, k, bwd_sims, bwd_ids, desc="search tgt->src", **options),
            ]
            peak = max(ray.get([a.peak_rss_mb.remote() for a in actors]))
        finally:
            for actor in actors:
                ray.kill(actor)
    log.info("search: %.1f s, peak memory per search actor %.0f MB", time.perf_counter() - started, peak)
    if stats is not None:
        stats.update(index=kinds, search_s=time.perf_counter() - started, actor_peak_rss_mb=peak)
