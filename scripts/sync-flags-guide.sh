#!/usr/bin/env bash
# Copy the project's Inductor flags guide (default: ../shared/reference beside this checkout) into
# docs/reference, the copy the tests read; then `pytest tests/compiler/test_flag_demos.py` says
# which new flags need a demo (GUIDE_FLAGS there, DEMOS in tuidebug/compiler/flag_demos.py).
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-${TUIDEBUG_FLAGS_GUIDE:-../shared/reference/inductor-flags-guide.md}}
[ -f "$src" ] || { echo "sync-flags-guide: no guide at $src (pass its path)" >&2; exit 2; }
cp "$src" docs/reference/inductor-flags-guide.md
git diff --stat -- docs/reference/inductor-flags-guide.md
