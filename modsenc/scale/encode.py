"""``modsenc scale encode``: a corpus encoded by a pool of Ray actors, one Parquet shard per input range.

The plan (``modsenc.scale.inputs``) splits the inputs into shards of ``shard_size`` rows. The
shards that have no output file yet become a Ray dataset, and ``map_batches`` hands them, one at a
time, to a fixed pool of :class:`ShardEncoder` actors: each holds one ``ModularEncoder`` (the
backbone loaded once, a language's modules on its first row of that language, as in one process),
reads its shard, routes every row, encodes it through ``ModularEncoder.encode`` (which groups the
rows by language) and writes ``shards/part-NNNNN.parquet`` atomically. A shard file therefore
exists only once it is complete: a killed job, resumed with the same arguments, skips those files
and encodes the rest, and no row is written twice. Ray restarts an actor that dies and retries its
shard (``max_restarts``/``max_task_retries``).

Output folder::

    manifest.json            the job (zoo, inputs, options), its id, status, counts
    shards/part-NNNNN.parquet  id, file, line, lang, route, detected, confidence, unsure, text,
                             [input_id,] vector (float32 or float16), in input order; input_id:
                             the --id-column value, as text; detected / confidence / unsure: the
                             router's (a row whose language was given: null / 1.0 / false)
    rejects/part-NNNNN.jsonl   rows whose language no bundle serves (written before the shard)
    hashes/part-NNNNN.sha256   the shard's sha256 (written before it; ``modsenc.scale.output``)
    rejects.jsonl            all rejected rows, once the job is complete

On a cluster the output folder must be on storage every node sees (each actor writes its shards).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import time
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from modsenc.backbone.precision import check_precision
from modsenc.data.errors import DataFormatError
from modsenc.data.readers import is_language_code
from modsenc.modules.bundle import Zoo, check_language_code, check_outside_zoo
from modsenc.routing.router import BACKBONE, OTHER_POLICIES
from modsenc.runtimes import check_runtime
from modsenc.scale.cluster import ray_session, user_error
from modsenc.scale.inputs import InputFile, Shard, list_inputs, plan_shards, read_shard
from modsenc.scale.output import (
    INPUT_ID,
    MANIFEST,
    SHARDS,
    check_finished_shards,
    check_output,
    finish_job,
    job_record,
    mark_failed,
    rejects_path,
    shard_path,
    shard_table,
    write_hash,
)
from modsenc.scale.output import write_embeddings as write_embeddings  # where callers found it before
from modsenc.utils.devices import check_device
from modsenc.utils.io import atomic_file, atomic_write_json, atomic_write_text, file_sha256, json_digest
from modsenc.utils.outputs import SCALE_JOB, check_output_location

log = logging.getLogger(__name__)

VECTOR_DTYPES = ("float32", "float16")  # the stored vectors' type (--vector-dtype)


class ShardEncoder:
    """A Ray Data callable class: one ``ModularEncoder`` per actor, one shard per call."""

    def __init__(
        self,
        zoo_dir: str,
        output: str,
        inputs: list[dict[str, Any]],
        lang: str,
        lang_field: str | None,
        text_field: str,
        mode: str,
        normalize: bool,
        vector_dtype: str,
        batch_size: int,
        device: str | None,
        verify: bool,
        quantize: str | None,
        threads: int,
        other: str = "backbone",
        id_column: str | None = None,
        dtype: str = "auto",
        runtime: str = "auto",
    ) -> None:
        import torch  # noqa: PLC0415

        from modsenc.encoder import ModularEncoder  # noqa: PLC0415

        torch.set_num_threads(threads)
        self.encoder = ModularEncoder.from_pretrained(
            zoo_dir,
            device=device,
            verify=verify,
            quantize=quantize,
            other=other,
            dtype=dtype,
            runtime=runtime,
        )
        self.output = Path(output)
        self.inputs = [InputFile(**f) for f in inputs]
        self.lang, self.lang_field, self.text_field, self.id_column = lang, lang_field, text_field, id_column
        self.mode, self.normalize, self.vector_dtype, self.batch_size = (
            mode,
            normalize,
            vector_dtype,
            batch_size,
        )

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        done: dict[str, list[Any]] = {"shard": [], "rows": [], "rejected": [], "seconds": [], "error": []}
        for spec in batch["spec"]:
            started, error = time.perf_counter(), ""
            shard = Shard(**json.loads(spec))
            try:
                rows, rejected = self.encode_shard(shard)
            except (DataFormatError, OSError) as err:
                # Raised, it would reach the driver as Ray's UserCodeException without its cause
                # (lost in pickling) under a page of traceback: a bad input (or an unwritable
                # output) travels back as a value, for the driver to raise as it is, in one line.
                rows, rejected, error = 0, 0, pickle.dumps(err).hex()
            values = (shard.index, rows, rejected, time.perf_counter() - started, error)
            for key, value in zip(done, values):
                done[key].append(value)
        return {key: np.asarray(values) for key, values in done.items()}

    def _route(self, texts: list[str], given: list[Any] | None) -> tuple[list[Any], ...]:
        """Each row's language (its bundle's, or the one detected when it goes to the backbone),
        route (``bundle``, ``backbone`` or ``refused``), why it was refused (None: kept), and the
        router's ``detected``, ``confidence`` and ``unsure`` (a given language: None, 1.0, False)."""
        installed = set(self.encoder.installed)
        langs: list[str | None] = [None] * len(texts)
        routes = ["refused"] * len(texts)
        reasons: list[str | None] = [None] * len(texts)
        detected: list[str | None] = [None] * len(texts)
        confidence, unsure = [1.0] * len(texts), [False] * len(texts)
        auto: list[int] = []
        for i in range(len(texts)):
            code = given[i] if given is not None and given[i] not in (None, "", "auto") else self.lang
            if code == "auto":
                auto.append(i)
            elif code == BACKBONE:
                routes[i] = "backbone"
            elif not isinstance(code, str) or not is_language_code(code):
                reasons[i] = f"invalid language code {code!r}"
            elif code not in installed:
                reasons[i] = f"no bundle for language {code!r} (installed: {', '.join(sorted(installed))})"
            else:
                langs[i], routes[i] = code, "bundle"
        if auto:  # the router of ModularEncoder.encode(lang="auto"), so the routes are the same
            for i, detection in zip(auto, self.encoder.detect_languages([texts[i] for i in auto])):
                langs[i], routes[i] = detection.lang, detection.route
                detected[i], confidence[i], unsure[i] = (
                    detection.detected,
                    detection.confidence,
                    detection.unsure,
                )
                if detection.route == "refused":
                    reasons[i] = detection.message
        return langs, routes, reasons, detected, confidence, unsure

    def encode_shard(self, shard: Shard) -> tuple[int, int]:
        import pyarrow.parquet as pq  # noqa: PLC0415

        info = self.inputs[shard.file]
        texts, given, ids = read_shard(info, shard, self.text_field, self.lang_field, self.id_column)
        langs, routes, reasons, detected, confidence, unsure = self._route(texts, given)
        keep = [i for i, route in enumerate(routes) if route != "refused"]
        rejected = [i for i, route in enumerate(routes) if route == "refused"]
        if rejected:  # before the shard: a shard file on disk means its rejects are on disk too
            self._write_rejects(shard, texts, given, ids, reasons, rejected)
        dim = self.encoder.get_sentence_embedding_dimension()
        vectors = np.zeros((0, dim), dtype=np.float32)
        if keep:
            vectors = self.encoder.encode(
                [texts[i] for i in keep],
                lang=[langs[i] if routes[i] == "bundle" else BACKBONE for i in keep],
                batch_size=self.batch_size,
                normalize_embeddings=self.normalize,
                mode=self.mode,
            )
        table = shard_table(
            [shard.first_id + i for i in keep],
            [shard.file] * len(keep),
            [shard.start + i + 1 for i in keep],
            [langs[i] for i in keep],
            [routes[i] for i in keep],
            [texts[i] for i in keep],
            np.ascontiguousarray(vectors.astype(self.vector_dtype)),
            None if ids is None else [ids[i] for i in keep],
            ([detected[i] for i in keep], [confidence[i] for i in keep], [unsure[i] for i in keep]),
        )
        with atomic_file(shard_path(self.output, shard.index)) as tmp:
            pq.write_table(table, tmp)
            # Before the rename, as the rejects: a shard file on disk always has its hash on disk.
            write_hash(self.output, shard.index, file_sha256(tmp))
        return len(keep), len(rejected)

    def _write_rejects(
        self,
        shard: Shard,
        texts: list[str],
        given: list[Any] | None,
        ids: list[str] | None,
        reasons: list[str | None],
        rejected: list[int],
    ) -> None:
        """The shard's refused rows, one JSON object a line, with their file, line and why."""
        info = self.inputs[shard.file]
        lines = []
        for i in rejected:
            row = {
                "id": shard.first_id + i,
                "file": info.path,
                "line": shard.start + i + 1,
                "lang": given[i] if given is not None and given[i] is not None else self.lang,
                "reason": reasons[i],
                "text": texts[i],
            }
            if ids is not None:
                row[INPUT_ID] = ids[i]
            lines.append(json.dumps(row, ensure_ascii=False) + "\n")
        atomic_write_text(rejects_path(self.output, shard.index), "".join(lines))


def _eta(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def encode_corpus(
    zoo_dir: str | os.PathLike,
    inputs: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    lang: str = "auto",
    lang_field: str | None = None,
    text_field: str = "text",
    mode: str = "cross",
    normalize: bool = False,
    vector_dtype: str = "float32",
    shard_size: int = 10000,
    batch_size: int = 32,
    workers: int = 1,
    threads: int = 1,
    address: str | None = None,
    resume: bool = False,
    device: str | None = None,
    verify: bool = True,
    quantize: str | None = None,
    other: str = "backbone",
    id_column: str | None = None,
    dtype: str = "auto",
    runtime: str = "auto",
) -> dict[str, Any]:
    """Encode ``inputs`` (files or folders) into Parquet shards under ``output``; returns the manifest.

    Each shard row keeps its ``lang`` and ``route``: ``bundle`` (its language's modules) or
    ``backbone`` (a language the zoo has no bundle for, by the ``other`` policy; ``refuse`` writes
    such rows to the rejects instead). ``id_column`` (a JSONL field or Parquet column) is kept as
    each row's ``input_id`` (``modsenc.scale.inputs``: every row needs one; not checked unique).
    ``dtype`` (auto, fp32, bf16) and ``runtime`` (torch, openvino) are the computation's, as in
    ``ModularEncoder.from_pretrained``; ``vector_dtype`` is the stored vectors' type."""
    _check_engine(other, device, address, runtime, quantize)
    zoo = _check_options(zoo_dir, lang, vector_dtype, dtype, workers, threads)
    output = Path(output)
    check_outside_zoo(output, zoo, "--output")
    check_output_location(output, "--output", inputs=inputs, own_kind=SCALE_JOB)  # not in another artefact
    infos, shards = _plan(inputs, output, shard_size, text_field, lang_field, id_column)
    job = job_record(
        zoo, infos, lang, lang_field, text_field, mode, normalize, vector_dtype, shard_size, quantize, other,
        id_column, dtype, runtime,
    )  # fmt: skip
    manifest = _begin(output, job, infos, shards, resume)
    todo = [s for s in shards if not shard_path(output, s.index).exists()]
    total_rows = sum(s.rows for s in todo)
    log.info(
        "encode: %d rows in %d shards, %d to do (%d rows), %d worker(s)",
        *(manifest["rows"], len(shards), len(todo), total_rows, workers),
    )
    try:
        if todo:
            _run(zoo_dir, output, todo, job, batch_size, workers, threads, address, device, verify)
        return finish_job(output, manifest, shards)
    except Exception as err:
        # A failed job says so, and why, in its manifest; a killed or interrupted one stays
        # "running". --resume continues either (its finished shards are kept).
        mark_failed(output, manifest, err)
        raise


def _begin(
    output: Path, job: dict[str, Any], infos: list[InputFile], shards: list[Shard], resume: bool
) -> dict[str, Any]:
    """The output folder checked (empty, or this job's with ``resume``) and its manifest written,
    status running; returns the manifest."""
    check_output(output, job, resume)
    # Before the manifest says running: a refused shard leaves the folder as it was.
    check_finished_shards(output, [s.index for s in shards])
    (output / SHARDS).mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"job": job, "job_id": json_digest(job)[:16], "status": "running"}
    manifest.update(shards=len(shards), rows=sum(f.rows for f in infos), dim=None)
    atomic_write_json(output / MANIFEST, manifest)
    return manifest


def _plan(
    inputs: Sequence[str | os.PathLike],
    output: Path,
    shard_size: int,
    text_field: str,
    lang_field: str | None,
    id_column: str | None = None,
) -> tuple[list[InputFile], list[Shard]]:
    """The input files and their shards; the fields the job reads checked in each (before Ray starts)."""
    files = list_inputs(inputs)
    for path in files:
        if path.resolve().is_relative_to(output.resolve()):
            raise ValueError(f"--input {path} lies inside --output {output}")
    infos, shards = plan_shards(files, shard_size, text_field, lang_field, id_column)
    if lang_field is not None and all(f.format == "text" for f in infos):
        raise ValueError(
            f"--lang-field {lang_field}: plain-text inputs have no fields (give JSONL or Parquet)"
        )
    return infos, shards


def _check_engine(
    other: str, device: str | None, address: str | None, runtime: str, quantize: str | None
) -> None:
    """The router policy, the device and the runtime checked before Ray starts."""
    if other not in OTHER_POLICIES:
        raise ValueError(f"--other must be one of {', '.join(OTHER_POLICIES)}, got {other!r}")
    # The actors run on this machine unless ``address`` names a remote cluster, whose GPUs this
    # machine cannot see (there only the name is checked, the actors do the rest).
    checked = check_device(device, "--device", available=address in (None, "auto"))
    check_runtime(runtime, quantize, checked)  # openvino: installed, on the CPU, not quantised


def _check_options(
    zoo_dir: str | os.PathLike, lang: str, vector_dtype: str, dtype: str, workers: int, threads: int
) -> Zoo:
    """``encode_corpus``'s options checked before any input is read; the zoo they name."""
    if vector_dtype not in VECTOR_DTYPES:
        raise ValueError(f"--vector-dtype must be one of {', '.join(VECTOR_DTYPES)}, got {vector_dtype!r}")
    if dtype in VECTOR_DTYPES:  # the stored vectors' type was once called dtype here
        raise ValueError(
            f"--dtype is the computation's precision (auto, fp32, bf16), got {dtype!r}: the stored "
            "vectors' type is --vector-dtype (vector_dtype=)"
        )
    check_precision(dtype)
    if workers < 1 or threads < 1:
        raise ValueError(
            f"--workers and --threads-per-worker must be at least 1, got {workers} and {threads}"
        )
    zoo = Zoo(zoo_dir)
    if not zoo.index_path.is_file():
        raise FileNotFoundError(f"--zoo {zoo_dir} is not a modsenc zoo (no index.json)")
    installed = zoo.languages()
    if lang not in ("auto", BACKBONE):
        check_language_code(lang)
        if lang not in installed:
            raise KeyError(
                f"--lang {lang}: no bundle for it in {zoo_dir} (installed: {', '.join(installed)})"
            )
    return zoo


def _run(
    zoo_dir: str | os.PathLike,
    output: Path,
    todo: list[Shard],
    job: dict[str, Any],
    batch_size: int,
    workers: int,
    threads: int,
    address: str | None,
    device: str | None,
    verify: bool,
) -> None:
    with ray_session(address, local_cpus=max(os.cpu_count() or 1, workers * threads)) as ray:
        dataset = ray.data.from_items(
            [{"spec": json.dumps(s.as_dict())} for s in todo], override_num_blocks=min(len(todo), 200)
        )
        # Ray 2.60 deprecates extra ``ray_remote_args`` keywords but has no named parameter for
        # max_restarts/max_task_retries, and Ray Data's own default (restart forever) would retry a
        # shard that kills its actor every time forever: keep them, without the warning about them.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
            encoded = _encoded(
                ray, dataset, zoo_dir, output, job, batch_size, workers, threads, device, verify
            )
        try:
            _follow(encoded.iter_rows(), todo)
        except Exception as err:
            cause = user_error(err)
            if cause is not err and isinstance(cause, (ValueError, KeyError, FileNotFoundError, OSError)):
                raise cause from None
            raise


def _encoded(
    ray: Any,
    dataset: Any,
    zoo_dir: str | os.PathLike,
    output: Path,
    job: dict[str, Any],
    batch_size: int,
    workers: int,
    threads: int,
    device: str | None,
    verify: bool,
) -> Any:
    """``dataset`` (one row per shard to encode) mapped through a pool of ``workers`` ShardEncoders."""
    return dataset.map_batches(
        ShardEncoder,
        batch_size=1,  # one shard per call: a shard is the unit of retry and of output
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=threads,
        num_gpus=1 if device and device.startswith("cuda") else None,
        fn_constructor_kwargs={
            "zoo_dir": str(zoo_dir),
            "output": str(output),
            "inputs": job["inputs"],
            "lang": job["lang"],
            "lang_field": job["lang_field"],
            "text_field": job["text_field"],
            "mode": job["mode"],
            "normalize": job["normalize"],
            "vector_dtype": job["vector_dtype"],
            "dtype": job["dtype"],
            "runtime": job["runtime"],
            "batch_size": batch_size,
            "device": device,
            "verify": verify,
            "quantize": job["quantize"],
            "threads": threads,
            "other": job["other"],
            "id_column": job.get("id_column"),
        },
        # A dead actor is replaced and its shard retried; a shard that kills three in a row is an error.
        max_restarts=3,
        max_task_retries=3,
    )


def _follow(done: Iterable[dict[str, Any]], todo: list[Shard]) -> None:
    """Log each shard as it is finished (rows/s, ETA); raise the input error a worker sent back."""
    rows_of = {s.index: s.rows for s in todo}
    total_rows = sum(rows_of.values())
    started, done_rows = time.perf_counter(), 0
    for done_shards, row in enumerate(done, 1):
        if row["error"]:  # pickled by our own ShardEncoder (see its __call__), as trusted as Ray's
            raise pickle.loads(bytes.fromhex(str(row["error"])))
        done_rows += rows_of[int(row["shard"])]
        elapsed = time.perf_counter() - started
        rate = done_rows / elapsed if elapsed > 0 else 0.0
        left = (total_rows - done_rows) / rate if rate > 0 else 0.0
        log.info(
            "encode: shard %d done (%d/%d shards, %d/%d rows), %.0f rows/s, ETA %s",
            *(int(row["shard"]), done_shards, len(todo), done_rows, total_rows, rate, _eta(left)),
        )
