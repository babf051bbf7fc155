"""``--allow-flag NAME``: the options of recompile, minify and bisect that confirm, by name, a
flag from a trace's config that names a program, path, module or callable (docs/security.md)."""

from __future__ import annotations

import argparse
from typing import Any

from tuidebug.compiler.trace_config import ANY


def allow_flag_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-flag", action="append", default=[], metavar="NAME",
                   help="apply this flag from the trace's config although it names a program, "
                        "path, module or callable (repeatable; --yes never does; without it "
                        "such a flag is left out, or asked for by name on a terminal)")


def allowed_flags(ns: argparse.Namespace) -> dict[str, Any]:
    """{name: ANY} for every ``--allow-flag NAME`` (``trace_config.check``'s ``allowed``)."""
    return {name: ANY for name in getattr(ns, "allow_flag", None) or []}
