"""`modsenc serve` as a real process on a free loopback port: answers, then drains on SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx
import numpy as np
import pytest
from click.testing import CliRunner

from modsenc.cli import main
from modsenc.encoder import ModularEncoder
from tests._zoo import HELD_OUT
from tests.training.conftest import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def queued(base: str) -> float:
    text = httpx.get(f"{base}/metrics").text
    return float(re.search(r"^modsenc_queue_inputs (\S+)$", text, re.MULTILINE).group(1))


def test_sigterm_drains_the_requests_in_flight(zoo_dir) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # A long batch wait (10 s) keeps the requests queued while the signal arrives, even on a busy CPU.
    command = [
        sys.executable,
        "-m",
        "modsenc.cli",
        "serve",
        "--zoo",
        str(zoo_dir),
        "--port",
        str(port),
        "--runtime",
        "torch",
    ]
    command += ["--device", "cpu", "--languages", "en", "--max-wait-ms", "10000", "--max-batch-size", "64"]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        # Only an upper bound: on a saturated shared CPU the process needs minutes to import and load.
        deadline = time.monotonic() + 600
        while True:
            assert server.poll() is None, server.communicate()[0]
            try:
                if httpx.get(f"{base}/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server never became ready"
            time.sleep(0.2)
        texts = [f"{HELD_OUT['en'][i % 2]} Item {i}." for i in range(6)]
        responses: dict[int, httpx.Response] = {}

        def post(i: int) -> None:
            responses[i] = httpx.post(
                f"{base}/v1/embeddings", json={"input": texts[i], "lang": "en"}, timeout=60
            )

        threads = [threading.Thread(target=post, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120
        while queued(base) < 6:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        server.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(timeout=60)
        output = server.communicate(timeout=60)[0]
    finally:
        if server.poll() is None:
            server.kill()
    # After its graceful shutdown uvicorn re-raises the signal it caught, so the process ends "killed
    # by SIGTERM" as supervisors expect; the log shows the orderly path.
    assert server.returncode == -signal.SIGTERM, output
    assert "Waiting for connections to close" in output and "Application shutdown complete" in output
    assert sorted(responses) == list(range(6)) and {r.status_code for r in responses.values()} == {200}
    reference = ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")
    for i, text in enumerate(texts):
        np.testing.assert_allclose(
            responses[i].json()["data"][0]["embedding"],
            reference.encode(text, lang="en", normalize_embeddings=True),
            atol=1e-6,
        )
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base}/health")


def test_serve_refuses_a_bad_zoo_or_language_before_binding(zoo_dir, tmp_path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["serve", "--zoo", str(tmp_path)])
    assert result.exit_code == 1 and f"{tmp_path} is not a modsenc zoo: no backbone/" in result.output
    result = runner.invoke(main, ["serve", "--zoo", str(zoo_dir), "--languages", "en,fr"])
    assert result.exit_code == 1
    assert (
        "--languages: language 'fr' is not installed" in result.output
        and "(installed: de, en, kk, uz)" in result.output
    )
    result = runner.invoke(main, ["serve", "--zoo", str(zoo_dir), "--max-inputs", "64", "--max-queue", "8"])
    assert result.exit_code == 1 and "max_queue (8) must be at least max_inputs (64)" in result.output
