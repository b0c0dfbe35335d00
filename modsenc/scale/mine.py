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

import logging
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from modsenc.eval.bitext import l2_normalise
from modsenc.eval.mining import MinedPair, best_by_margin, neighbour_means, select_pairs, write_pairs
from modsenc.scale.cluster import ray_session
from modsenc.scale.embeddings import Embeddings
from modsenc.utils.io import atomic_write_text
from modsenc.utils.outputs import check_output_location

log = logging.getLogger(__name__)


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
