"""The one entry point: ``tuidebug <command> …`` (also ``python -m tuidebug …``).

Every sub-command is wired here, in ``COMMANDS``; its arguments and its code live in the module
of its group (``compiling``, ``viewing``, ``minifying``, ``sharing``, ``demo``, ``completion``).
This package never imports torch itself: commands that need the compiler run it in a child process or import it only when
they run. Nothing imports this package; errors for the user come from ``tuidebug.errors``.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Callable

from tuidebug.version import __version__
from tuidebug.cli import (advising, agents, compiling, completion, demo, distributed, minifying,
                          numerics, sharing, viewing)
from tuidebug.cli.output import err
from tuidebug.errors import TuidebugError


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None
    needs_torch: bool = False  # a compiler command: checked before it runs (torch_version)


COMMANDS: tuple[Command, ...] = (
    Command("trace", "run a script with capture on and write a trace",
            compiling.trace_arguments, compiling.cmd_trace, needs_torch=True),
    Command("info", "summarise a trace (or a TORCH_TRACE log / debug folder)",
            viewing.info_arguments, viewing.cmd_info),
    Command("open", "open a trace (or a TORCH_TRACE log / debug folder) in the TUI",
            viewing.open_arguments, viewing.cmd_open),
    Command("import", "import a TORCH_TRACE log or torch_compile_debug folder",
            viewing.import_arguments, viewing.cmd_import),
    Command("merge", "combine the job folders of a distributed trace (one per node) into one",
            distributed.merge_arguments, distributed.cmd_merge),
    Command("demo", "trace the bundled transformer example and open it",
            demo.demo_arguments, demo.cmd_demo, needs_torch=True),
    Command("svg", "export a captured graph as SVG (Graphviz)",
            viewing.svg_arguments, viewing.cmd_svg, viewing.SVG_DESCRIPTION),
    Command("perfetto", "write compile phases, passes and a profiled run as Chrome trace JSON "
                        "(Perfetto)",
            viewing.perfetto_arguments, viewing.cmd_perfetto, viewing.PERFETTO_DESCRIPTION),
    Command("flags", "list and search every Inductor flag with its documentation; "
                     "`flags demo NAME` toggles one and shows what changes",
            compiling.flags_arguments, compiling.cmd_flags, needs_torch=True),
    Command("recompile", "recompile a trace with changed Inductor flags and compare (the "
                         "original trace is never modified)",
            compiling.recompile_arguments, compiling.cmd_recompile, needs_torch=True),
    Command("advise", "what to do about a trace's graph breaks and recompiles; --try runs the "
                      "script with each suggestion applied and reports compiles before → after",
            advising.advise_arguments, advising.cmd_advise),
    Command("numerics", "which kernel made it wrong: re-run a trace's script judging every "
                        "kernel against eager and float64 (the first diverging kernel, classified)",
            numerics.numerics_arguments, numerics.cmd_numerics, numerics.DESCRIPTION,
            needs_torch=True),
    Command("diff", "compare two traces: config, passes, IR, fusion, kernels, times",
            viewing.diff_arguments, viewing.cmd_diff),
    Command("minify", "shrink a failed trace into a standalone repro.py",
            minifying.minify_arguments, minifying.cmd_minify, minifying.MINIFY_DESCRIPTION,
            needs_torch=True),
    Command("bisect", "name the backend / Inductor pass responsible for a failed trace",
            minifying.bisect_arguments, minifying.cmd_bisect, minifying.BISECT_DESCRIPTION,
            needs_torch=True),
    Command("serve", "serve the TUI on a trace as a web page (this machine only, by default)",
            sharing.serve_arguments, sharing.cmd_serve, sharing.SERVE_DESCRIPTION),
    Command("pack", "write a trace as one .tar.gz (with a manifest of hashes) to share",
            sharing.pack_arguments, sharing.cmd_pack, sharing.PACK_DESCRIPTION),
    Command("mcp", "serve the trace queries to agents: a Model Context Protocol server (stdio)",
            agents.mcp_arguments, agents.cmd_mcp, agents.MCP_DESCRIPTION),
    Command("completion", "print a shell completion script: bash, zsh or fish",
            completion.completion_arguments, completion.cmd_completion,
            completion.DESCRIPTION),
)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="tuidebug",
        description="Debug torch.compile: trace Inductor, explore passes, IR, kernels and "
                    "provenance, export SVGs, recompile with other flags, minify failures.")
    ap.add_argument("--version", action="version", version=f"tuidebug {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.description)
        command.arguments(p)
        p.set_defaults(fn=command.run, needs_torch=command.needs_torch)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        argv = ["demo"]
    ap = build_parser()
    ns = ap.parse_args(argv)
    if not getattr(ns, "fn", None):
        ap.print_help()
        return 2
    try:
        if ns.needs_torch:
            from tuidebug.compiler.torch_version import require_torch

            require_torch(ns.command)
        return int(ns.fn(ns) or 0)
    except TuidebugError as e:
        err(str(e))
        return 2
    except KeyboardInterrupt:
        err("interrupted")
        return 130
    except BrokenPipeError:  # `tuidebug info TRACE | head`: quietly, as rich does (exit 1)
        _silence_stdout()
        return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises nothing more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
