"""Start-up time of the command line: what a user waits for before anything happens.

    python -m bench.startup [--runs 5] [--markdown]

Times, each in a fresh subprocess, the median wall-clock time of ``--runs`` runs of:

* ``modsenc --help`` (click parses the group; no command runs),
* ``modsenc zoo list`` (the default zoo: the shipped one outside a checkout, ``adapters_zoo/`` in
  one; it reads JSON files only),
* ``python -c "import modsenc"``,

after one untimed warm-up run of each (so the first run's disk reads are not counted). The machine
line names the CPU (lscpu's model name and the vector flags that matter here) and the core count.
It is a benchmark, not a test: the numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import lscpu

WANTED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def commands() -> dict[str, list[str]]:
    """The timed commands; the ``modsenc`` script next to this interpreter (the virtualenv's)."""
    script = Path(sys.executable).with_name("modsenc")
    modsenc = [str(script)] if script.exists() else [shutil.which("modsenc") or "modsenc"]
    return {
        "modsenc --help": [*modsenc, "--help"],
        "modsenc zoo list": [*modsenc, "zoo", "list"],
        'python -c "import modsenc"': [sys.executable, "-c", "import modsenc"],
    }


def time_command(argv: list[str], runs: int) -> list[float]:
    """Wall-clock seconds of ``runs`` runs, after one untimed warm-up; a failing run is an error."""
    subprocess.run(argv, capture_output=True, check=True)
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        seconds.append(time.perf_counter() - started)
    return seconds


def machine() -> str:
    """The CPU as lscpu names it, the flags of WANTED_FLAGS it has, cores and the load average."""
    model, flags = lscpu()
    present = [f for f in WANTED_FLAGS if f in flags]
    load = os.getloadavg()[0]
    return (
        f"{model}, {os.cpu_count()} cores, flags {' '.join(present) or 'none'} "
        f"(of {' '.join(WANTED_FLAGS)}); load average {load:.2f} at the start"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command (the median is reported)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args()
    print(machine())
    rows = []
    for name, argv in commands().items():
        seconds = time_command(argv, args.runs)
        rows.append((name, statistics.median(seconds), min(seconds), max(seconds)))
    if args.markdown:
        print(f"\n| command | median s ({args.runs} runs) | min s | max s |\n|---|---|---|---|")
        for name, median, low, high in rows:
            print(f"| `{name}` | {median:.2f} | {low:.2f} | {high:.2f} |")
    else:
        for name, median, low, high in rows:
            print(f"{name:32s} median {median:.3f} s  (min {low:.3f}, max {high:.3f})")


if __name__ == "__main__":
    main()
