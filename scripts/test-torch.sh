#!/usr/bin/env bash
# Run the test suite against another torch release:
#
#   scripts/test-torch.sh VERSION [pytest arguments…]     e.g.  scripts/test-torch.sh 2.15 -x tests/compiler
#
# Builds .venv-torchVERSION once (torch==VERSION.*, the test requirements, this checkout in
# editable mode), then runs pytest in it; the arguments after VERSION go to pytest. torch comes
# from the machine's wheels and indexes when they have that release (2.13: the CPU wheel on
# disk), else from PyPI with the machine's pip configuration left out (its constraints cap torch
# at the releases on disk; PyPI's Linux build is the CUDA one, which runs fine on a CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+\.[0-9]+$ ]]; then
  echo "usage: scripts/test-torch.sh VERSION [pytest arguments…]   (VERSION: 2.11, 2.13, 2.15…)" >&2
  exit 2
fi
V=$1
shift
VENV=.venv-torch$V
PY=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
has_torch() {
  "$VENV/bin/python" -c "import sys, torch; sys.exit(not torch.__version__.startswith('$V.'))" 2>/dev/null
}
if ! has_torch; then
  echo "test-torch: installing torch $V.* into $VENV…" >&2
  "$VENV/bin/python" -m pip install -q "torch==$V.*" 2>/dev/null \
    || PIP_CONFIG_FILE=/dev/null "$VENV/bin/python" -m pip install -q "torch==$V.*"
  has_torch || { echo "test-torch: torch $V.* did not install" >&2; exit 1; }
fi
# the rest of the dev requirements, without their torch pin (this venv keeps its own torch)
reqs=$(mktemp)
trap 'rm -f "$reqs"' EXIT
grep -v -E '^torch([=<>!~ ]|$)' requirements-dev.txt >"$reqs"
"$VENV/bin/python" -m pip install -q -r "$reqs"
"$VENV/bin/python" -m pip install -q --no-deps -e . >/dev/null
"$VENV/bin/python" -c "import torch; print(f'test-torch: torch {torch.__version__} in $VENV')" >&2
exec "$VENV/bin/python" -m pytest "$@"
