#!/usr/bin/env bash
# Set up a development environment in .venv: torch pinned to the 2.13.0 CPU wheel, the package
# in editable mode with its test extras, and from Debian when they are missing: graphviz's `dot`,
# chromium (the browser the `tuidebug serve` test drives through Playwright), zsh and fish (the
# shell-completion tests).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# pip quiet (-q): its warnings and errors only. A machine whose pip config names index folders
# (file:///…/simple) that do not hold every package gets a warning per package looked up there
# ("Location 'file:///opt/pypi/simple/torch/' is ignored: it is neither a file nor a
# directory"), a screen of them before the demo: an install that succeeds leaves those out and
# shows pip's other warnings; one that fails shows everything it said.
pip_install() {
  local log rc=0
  log=$(mktemp)
  .venv/bin/python -m pip install -q --disable-pip-version-check "$@" 2>"$log" || rc=$?
  if [ "$rc" = 0 ]; then
    grep -v -E "^WARNING: Location '[^']*' is ignored: it is neither a file nor a directory\.?$" \
      "$log" >&2 || true
  else
    cat "$log" >&2
  fi
  rm -f "$log"
  return "$rc"
}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# torch first: the 2.13.0 CPU build, from the wheels and indexes this machine's pip is set up with
# (no other index is reached; other torch releases: scripts/test-torch.sh VERSION)
TORCH_PIN=$(grep -E '^torch==' requirements-dev.txt)
if ! .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__ != '${TORCH_PIN#torch==}')" 2>/dev/null; then
  pip_install "$TORCH_PIN" || {
    echo "setup: $TORCH_PIN is not in this machine's wheels or package indexes" \
         "(pip config list shows them)" >&2
    exit 1
  }
fi
pip_install -r requirements-dev.txt
# (setuptools' notes about editable installs go to the log, shown only if the install fails)
log=$(mktemp)
.venv/bin/python -m pip install -q --no-deps -e . >"$log" 2>&1 || { cat "$log" >&2; rm -f "$log"; exit 1; }
rm -f "$log"
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
  || missing+=(chromium)
command -v zsh >/dev/null 2>&1 || missing+=(zsh)    # the completion tests type TAB in them
command -v fish >/dev/null 2>&1 || missing+=(fish)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]} (SVG export; the tests of serve and completion)…" >&2
    apt-get update -qq || true
    for pkg in "${missing[@]}"; do
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null \
        || echo "warning: could not install $pkg (graphviz: SVG export writes .dot files only;" \
                "chromium, zsh, fish: the tests that need them are skipped, saying why)" >&2
    done
  else
    echo "note: not installed: ${missing[*]} (apt-get install ${missing[*]}): graphviz for SVG" \
         "export; chromium, zsh and fish for the tests of serve and completion" >&2
  fi
fi
