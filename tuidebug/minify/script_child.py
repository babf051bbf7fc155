"""Child process of ``tuidebug bisect`` without ``--repro``: run the traced script again, with
the Inductor config values it was traced with (``tuidebug trace --set``, the manifest's
``config_overrides``) applied as the capture applied them, around the whole script.

    python -m tuidebug.minify.script_child CONFIG_JSON SCRIPT [ARGS...]

The exit status is the script's (1 for an exception it raised), as when it runs on its own.
"""

from __future__ import annotations

import json
import os
import runpy
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m tuidebug.minify.script_child CONFIG_JSON SCRIPT [ARGS...]",
              file=sys.stderr)
        return 2
    overrides = json.loads(argv[0])
    script = os.path.abspath(argv[1])
    sys.argv = [script, *argv[2:]]
    sys.path.insert(0, os.path.dirname(script))
    from tuidebug.compiler import compat

    with compat.inductor_config_patch(overrides):
        runpy.run_path(script, run_name="__main__")  # SystemExit and exceptions propagate
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
