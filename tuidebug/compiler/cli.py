"""Sub-commands that need the compiler package: ``flags`` (recompile/diff register here too)."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_flags(ns: argparse.Namespace) -> int:
    from tuidebug.compiler.flags import flags_main

    return flags_main(ns.pattern, ns.json)


def register(sub: Any) -> None:
    p = sub.add_parser("flags", help="list and search every Inductor flag with its documentation")
    p.add_argument("pattern", nargs="?", help="substring or glob (e.g. triton.*)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_flags)
