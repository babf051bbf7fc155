"""``tuidebug mcp``: the trace queries as a Model Context Protocol server for agents (stdio)."""

from __future__ import annotations

import argparse

MCP_DESCRIPTION = (
    "Serve the trace queries to an agent (Claude Code, Claude Desktop, any MCP client) as a "
    "Model Context Protocol server on stdin/stdout: open a trace, its summary, graph breaks "
    "and recompiles with advice, a job's first divergence, the profile, the numerics, kernels "
    "for a line and lines for a kernel, a graph stage, two traces compared, and any record by "
    "its reference. Each answer is bounded (--max-chars; long lists paged). Read-only unless "
    "--allow-run: then recompile runs once the user agreed to its plan. "
    "TRACE…: opened at start (handles t1, t2…); any trace can be opened later by path.")


def mcp_arguments(p: argparse.ArgumentParser) -> None:
    from tuidebug.mcp.bounded import DEFAULT_CAP, MIN_CAP

    p.add_argument("traces", nargs="*", metavar="TRACE",
                   help="traces (or anything `open` accepts) to open at start")
    p.add_argument("--max-chars", type=int, default=DEFAULT_CAP,
                   help=f"the size cap of one answer, in characters (default {DEFAULT_CAP}, "
                        f"at least {MIN_CAP})")
    p.add_argument("--allow-run", action="store_true",
                   help="offer the recompile tool: the trace's script runs again once the "
                        "person at the MCP client agreed to the plan it is shown (elicitation)")


def cmd_mcp(ns: argparse.Namespace) -> int:
    from tuidebug.mcp.server import serve_stdio

    serve_stdio(list(ns.traces), cap=ns.max_chars, allow_run=ns.allow_run)
    return 0
