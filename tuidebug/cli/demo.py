"""``tuidebug demo`` (also what a bare ``tuidebug`` runs): trace the bundled example and open it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tuidebug.cli.compiling import default_out, run_trace, trace_outcome
from tuidebug.cli.viewing import open_trace, print_info
from tuidebug.errors import CliError

EXAMPLES_DIR = Path(__file__).resolve().parent.parent.parent / "examples"
DEMO_EXAMPLE = "transformer_block.py"


def demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output")
    p.add_argument("--no-open", action="store_true", help="print the summary instead")


def cmd_demo(ns: argparse.Namespace) -> int:
    example = EXAMPLES_DIR / DEMO_EXAMPLE
    if not example.exists():
        raise CliError(f"bundled example not found: {example}")
    out = Path(ns.output) if ns.output else default_out(example)
    code, out, tail = run_trace(str(example), [], out, own_exit=True)
    rc = trace_outcome(code, out, tail)
    if rc != 0:
        return rc
    if ns.no_open or not _interactive():
        print_info(out, as_json=False)
        if not ns.no_open:
            print(f"[tuidebug] no terminal to open the UI in; open it with: tuidebug open {out}",
                  file=sys.stderr)
        return 0
    return open_trace(out)


def _interactive() -> bool:
    """Whether the terminal UI can run here: stdin and stdout are a terminal."""
    return all(s is not None and s.isatty() for s in (sys.stdin, sys.stdout))
