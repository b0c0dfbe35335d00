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
step "done"
