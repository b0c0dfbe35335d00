"""Helpers the benchmark and experiment scripts share: running `modsenc` commands as a cache, writing
a script's own marked block of a results page, the machine line, the held-out evaluation files and
reading scores.

The scripts run from the repository root as modules (``python -m bench.x``) and import it as
``bench.common``; experiments/common.py builds the experiments' helpers on it.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from modsenc.data.splits import rows_in
from modsenc.utils.io import atomic_write_text

MODSENC = [sys.executable, "-m", "modsenc.cli"]
KARDES_TARGETS = ("uz", "kk", "az")
NTREX_LANGS = ("uz", "kk", "az", "tr")  # the languages of NTREX-128 in ../shared/data/parallel/ntrex.tsv
# The CPU flags that decide which kernels run (AVX2 / AVX-512 / VNNI, native bf16, AMX), named in
# every machine line a benchmark prints.
RELEVANT_FLAGS = (
    "avx2",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)


class Runner:
    """Runs `modsenc` commands unless their output exists; remembers every command for the doc."""

    def __init__(self, dry_run: bool = False) -> None:
        self.dry_run = dry_run
        self.commands: dict[str, list[str]] = {}
        self.seconds: dict[str, float] = {}

    def __call__(self, section: str, args: list[str], output: Path, log: Path | None = None) -> None:
        shown = "modsenc " + " ".join(shlex.quote(a) for a in args)
        self.commands.setdefault(section, []).append(shown)
        if output.exists():
            return
        print(f"$ {shown}", flush=True)
        if self.dry_run:
            return
        started = time.time()
        with open(log, "w", encoding="utf-8") if log else open(os.devnull, "w") as sink:
            result = subprocess.run([*MODSENC, *args], stdout=sink, stderr=subprocess.STDOUT, check=False)
        if result.returncode != 0:
            raise SystemExit(f"failed ({result.returncode}): {shown}" + (f"; see {log}" if log else ""))
        self.seconds[shown] = round(time.time() - started, 1)


def replace_section(out: Path, begin: str, end: str, body: str, prepend: bool = False) -> None:
    """Write ``body`` (which starts with ``begin`` and ends with ``end``) in place of that section
    of ``out``, atomically, keeping the rest; a missing section is added at the end (or start).

    Each results page under docs/results/ has one writer, which rewrites only its marked block, so
    the analysis written around the block survives a rerun."""
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    if begin in old and end in old:
        new = old[: old.index(begin)] + body + old[old.index(end) + len(end) :]
    elif prepend:
        new = body + "\n\n" + old
    else:
        new = old.rstrip("\n") + ("\n\n" if old else "") + body + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, new)


def lscpu() -> tuple[str, list[str]]:
    """The CPU's model name and flags, as lscpu reports them (/proc/cpuinfo where lscpu is missing)."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8").replace("model name", "Model name")
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields.get("Model name", "unknown"), fields.get("Flags", fields.get("flags", "")).split()


def machine() -> str:
    """The machine line of the results pages bench/shipped_zoo.py, bench/int8_quality.py and
    experiments/default_mode.py write: the CPU's model, architecture and the flags of note it has."""
    model, flags = lscpu()
    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8")
    present = [f for f in wanted if f in flags]
    return (
        f"{model} ({platform.machine()}), lscpu flags: {' '.join(present) or 'none of ' + ' '.join(wanted)}"
    )


# ----------------------------------------------------------------------------------------- data
def read_tsv(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:] if line]


def write_tsv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    atomic_write_text(path, "\n".join("\t".join(r) for r in [header, *rows]) + "\n")


def _in_part(rows: list[list[str]], part: str | None) -> list[list[str]]:
    """An STS file's rows in ``part`` (selection or report, modsenc/data/splits.py; None: all)."""
    if part is None:
        return rows
    return [rows[i] for i in rows_in([(r[2], r[3]) for r in rows], part)]


def sts_subset(
    sts: Path, out: Path, langs: tuple[str, ...], first: str | None = None, part: str | None = None
) -> Path:
    """The rows of an STS file whose two languages are both in ``langs`` (and lang1 is ``first``),
    of its ``part`` (None: both)."""
    header, rows = read_tsv(sts)
    rows = _in_part(rows, part)
    keep = [r for r in rows if r[0] in langs and r[1] in langs and first in (None, r[0])]
    write_tsv(out, header, keep)
    return out


def kardes_sts_bitext(
    sts: Path, out: Path, targets: tuple[str, ...] = KARDES_TARGETS, part: str | None = None
) -> Path:
    """en/``targets`` (default uz/kk/az) translations of the distinct English sentences of
    kardes-sts-dev (of its ``part``; a pair's rows are one group, so the part keeps them aligned)."""
    _, rows = read_tsv(sts)
    rows = _in_part(rows, part)
    groups: dict[tuple[str, str], list[list[str]]] = {}
    for row in rows:
        groups.setdefault((row[0], row[1]), []).append(row)
    english = groups[("en", "en")]
    columns: dict[str, dict[str, str]] = {}
    for lang in targets:
        mono, cross = groups[(lang, lang)], groups[("en", lang)]
        # en-XX row i = (English sentence1 of en-en row i, XX sentence2 of XX-XX row i): the check
        # that all three groups are in the same order.
        aligned = len(english) == len(mono) == len(cross) and all(
            e[2] == c[2] and m[3] == c[3] for e, m, c in zip(english, mono, cross)
        )
        if not aligned:
            raise ValueError(f"{sts}: en-en, {lang}-{lang} and en-{lang} rows are not row-aligned")
        for e, m in zip(english, mono):
            for column in (2, 3):
                columns.setdefault(e[column], {}).setdefault(lang, m[column])
    rows_out = [
        [en] + [tr[lang] for lang in targets] for en, tr in columns.items() if len(tr) == len(targets)
    ]
    write_tsv(out, ["en", *targets], rows_out)
    return out


def heldout(work: Path, data: Path, langs: tuple[str, ...], part: str | None) -> tuple[Path, list[str]]:
    """The STS rows of en and ``langs``, and the --bitext specs (Kardeş; NTREX where it has them),
    of the dev files' ``part`` (report: what no training or choice reads; None: the whole files)."""
    evaldata = work / "evaldata"
    evaldata.mkdir(parents=True, exist_ok=True)
    kardes = data / "eval-dev" / "sts" / "kardes-sts-dev.tsv"
    tag = "-".join(langs) + (f".{part}" if part else "")
    bitext = kardes_sts_bitext(kardes, evaldata / f"kardes-bitext.{tag}.tsv", langs, part=part)
    sts = sts_subset(kardes, evaldata / f"kardes-sts-dev.en-{tag}.tsv", ("en", *langs), part=part)
    specs = [f"{{path: {bitext}, languages: [en, {', '.join(langs)}]}}"]
    ntrex = [lang for lang in langs if lang in NTREX_LANGS]
    if ntrex:
        split = f", split: {part}" if part else ""
        specs.append(
            f"{{path: {data / 'parallel' / 'ntrex.tsv'}, languages: [en, {', '.join(ntrex)}]{split}}}"
        )
    return sts, specs


# --------------------------------------------------------------------------------------- scores
def sts_score(result: dict, pair: str) -> float | None:
    """Spearman x100 of ``pair`` (e.g. "en-uz") in a `modsenc eval --json` result, from any STS file."""
    return next((e["spearman"][pair] for e in result.get("sts", {}).values() if pair in e["spearman"]), None)


def xsim_score(result: dict, file: str, pair: str) -> float | None:
    """xsim error % of ``pair`` on the bitext whose name contains ``file`` (`modsenc eval --json`)."""
    return next(
        (p[pair]["xsim_error"] for n, p in result.get("bitext", {}).items() if file in n and pair in p), None
    )


def columns(lang: str) -> list[tuple[str, str, object, bool]]:
    """(header, mode, getter, higher is better) of one language's table over :func:`heldout`'s
    files (bench/shipped_zoo.py, bench/int8_quality.py)."""
    out = [
        (f"STS {lang}-{lang}", "mono", lambda r: sts_score(r, f"{lang}-{lang}"), True),
        # the same pairs as a user gets them by default (cross: through the CLA)
        (f"STS {lang}-{lang} default mode", "cross", lambda r: sts_score(r, f"{lang}-{lang}"), True),
        (f"STS en-{lang}", "cross", lambda r: sts_score(r, f"en-{lang}"), True),
    ]
    files = [("kardes-bitext", "Kardeş")] + ([("ntrex", "NTREX")] if lang in NTREX_LANGS else [])
    for file, label in files:
        for pair in (f"en-{lang}", f"{lang}-en"):
            out.append(
                (f"xsim {pair} {label}", "cross", lambda r, f=file, p=pair: xsim_score(r, f, p), False)
            )
    return out
