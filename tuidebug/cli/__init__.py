"""The one entry point: ``tuidebug <command> …`` (also ``python -m tuidebug …``).

Every sub-command is wired here, in ``COMMANDS``; its arguments and its code live in the module
of its group (``compiling``, ``viewing``, ``minifying``, ``sharing``, ``demo``, ``completion``).
This package never imports torch itself: commands that need the compiler run it in a child process or import it only when
they run. Nothing imports this package; errors for the user come from ``tuidebug.errors``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

from tuidebug.version import __version__
from tuidebug.cli.output import err
from tuidebug.errors import TuidebugError


def _advising() -> ModuleType:
    from tuidebug.cli import advising
    return advising


def _agents() -> ModuleType:
    from tuidebug.cli import agents
    return agents


def _compiling() -> ModuleType:
    from tuidebug.cli import compiling
    return compiling


def _completion() -> ModuleType:
    from tuidebug.cli import completion
    return completion


def _demo() -> ModuleType:
    from tuidebug.cli import demo
    return demo


def _distributed() -> ModuleType:
    from tuidebug.cli import distributed
    return distributed


def _minifying() -> ModuleType:
    from tuidebug.cli import minifying
    return minifying


def _numerics() -> ModuleType:
    from tuidebug.cli import numerics
    return numerics


def _sharing() -> ModuleType:
    from tuidebug.cli import sharing
    return sharing


def _viewing() -> ModuleType:
    from tuidebug.cli import viewing
    return viewing


@dataclass(frozen=True)
class Command:
    """A sub-command. Its group's module is imported only when the command is parsed or run
    (``tuidebug info`` never imports what ``trace``, ``mcp`` or ``serve`` need): ``arguments``,
    ``run`` and ``description`` name the group's function adding its arguments, the function
    running it and the constant describing it."""

    name: str
    help: str
    group: Callable[[], ModuleType]
    arguments: str
    run: str
    description: str | None = None
    needs_torch: bool = False  # a compiler command: checked before it runs (torch_version)
    stays: bool = False  # runs until the user ends it (the TUI, a server): collected as usual
    # drives torch's compiler for minutes (bisect runs its bisector in this process; torch's
    # compile makes cyclic garbage): collected as usual too
    compiles: bool = False

    def add_to(self, sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
        """Its parser, with its arguments, under ``sub``."""
        module = self.group()
        description = getattr(module, self.description) if self.description else None
        p = sub.add_parser(self.name, help=self.help, description=description)
        getattr(module, self.arguments)(p)
        p.set_defaults(fn=getattr(module, self.run), needs_torch=self.needs_torch,
                       gc_as_usual=self.stays or self.compiles)


COMMANDS: tuple[Command, ...] = (
    Command("trace", "run a script with capture on and write a trace",
            _compiling, "trace_arguments", "cmd_trace", needs_torch=True),
    Command("info", "summarise a trace (or a TORCH_TRACE log / debug folder)",
            _viewing, "info_arguments", "cmd_info"),
    Command("open", "open a trace (or a TORCH_TRACE log / debug folder) in the TUI",
            _viewing, "open_arguments", "cmd_open", stays=True),
    Command("import", "import a TORCH_TRACE log or torch_compile_debug folder",
            _viewing, "import_arguments", "cmd_import"),
    Command("merge", "combine the job folders of a distributed trace (one per node) into one",
            _distributed, "merge_arguments", "cmd_merge"),
    Command("demo", "trace the bundled transformer example and open it",
            _demo, "demo_arguments", "cmd_demo", needs_torch=True, stays=True),
    Command("svg", "export a captured graph as SVG (Graphviz)",
            _viewing, "svg_arguments", "cmd_svg", "SVG_DESCRIPTION"),
    Command("perfetto", "write compile phases, passes and a profiled run as Chrome trace JSON "
                        "(Perfetto)",
            _viewing, "perfetto_arguments", "cmd_perfetto", "PERFETTO_DESCRIPTION"),
    Command("flags", "list and search every Inductor flag with its documentation; "
                     "`flags demo NAME` toggles one and shows what changes",
            _compiling, "flags_arguments", "cmd_flags", needs_torch=True),
    Command("recompile", "recompile a trace with changed Inductor flags and compare (the "
                         "original trace is never modified)",
            _compiling, "recompile_arguments", "cmd_recompile", needs_torch=True),
    Command("advise", "what to do about a trace's graph breaks and recompiles; --try runs the "
                      "script with each suggestion applied and reports compiles before → after",
            _advising, "advise_arguments", "cmd_advise"),
    Command("numerics", "which kernel made it wrong: re-run a trace's script judging every "
                        "kernel against eager and float64 (the first diverging kernel, classified)",
            _numerics, "numerics_arguments", "cmd_numerics", "DESCRIPTION",
            needs_torch=True),
    Command("diff", "compare two traces: config, passes, IR, fusion, kernels, times",
            _viewing, "diff_arguments", "cmd_diff"),
    Command("minify", "shrink a failed trace into a standalone repro.py",
            _minifying, "minify_arguments", "cmd_minify", "MINIFY_DESCRIPTION",
            needs_torch=True, compiles=True),
    Command("bisect", "name the backend / Inductor pass responsible for a failed trace",
            _minifying, "bisect_arguments", "cmd_bisect", "BISECT_DESCRIPTION",
            needs_torch=True, compiles=True),
    Command("serve", "serve the TUI on a trace as a web page (this machine only, by default)",
            _sharing, "serve_arguments", "cmd_serve", "SERVE_DESCRIPTION", stays=True),
    Command("pack", "write a trace as one .tar.gz (with a manifest of hashes) to share",
            _sharing, "pack_arguments", "cmd_pack", "PACK_DESCRIPTION"),
    Command("mcp", "serve the trace queries to agents: a Model Context Protocol server (stdio)",
            _agents, "mcp_arguments", "cmd_mcp", "MCP_DESCRIPTION", stays=True),
    Command("completion", "print a shell completion script: bash, zsh or fish",
            _completion, "completion_arguments", "cmd_completion", "DESCRIPTION"),
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or with ``only`` (a command's name) of that one alone: the
    others are listed, for ``--help``, without their arguments, and their modules not imported."""
    ap = argparse.ArgumentParser(
        prog="tuidebug",
        description="Debug torch.compile: trace Inductor, explore passes, IR, kernels and "
                    "provenance, export SVGs, recompile with other flags, minify failures.")
    ap.add_argument("--version", action="version", version=f"tuidebug {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        if only is None or command.name == only:
            command.add_to(sub)
        else:
            sub.add_parser(command.name, help=command.help)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        argv = ["demo"]
    ap = build_parser(only=argv[0])  # not a command (--help, a typo): none built in full
    ns = ap.parse_args(argv)
    if not getattr(ns, "fn", None):
        ap.print_help()
        return 2
    if not ns.gc_as_usual:
        _fewer_collections()
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


def _fewer_collections() -> None:
    """Collect cyclic garbage less often, in a command that ends on its own: reading a trace
    allocates a few hundred thousand small objects (parsed JSON, nodes), none of them in cycles,
    and with the default thresholds the collector walks them over and over (a tenth of
    ``diff``'s time on a 24-layer model). What is loaded by now (modules, the parser) is frozen:
    never walked again. The TUI and the servers, which run for hours and make cyclic garbage
    (widgets, requests), keep the default pace, and so do ``minify`` and ``bisect``, which
    drive torch's compiler for minutes (``bisect`` runs the compiler bisector in this process;
    torch's compile makes cyclic garbage)."""
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises nothing more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
