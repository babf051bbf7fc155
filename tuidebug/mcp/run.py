"""The one MCP tool that runs code, offered only by ``tuidebug mcp --allow-run``: ``recompile``.

The consent rules are those of the terminal (``compiler.consent``, docs/security.md): before
anything runs, the person at the MCP client is shown the plan — program, arguments, directory,
Inductor config, environment, where the trace came from — through the protocol's elicitation
(the client asks its user, as the TUI's dialog does), and must answer yes; flags of the trace that
name a program, path, module or callable are applied only when typed by name there. A client
that cannot ask its user gets an error, never a default yes. The flags the agent asks to set
are held to the rules of config read from a trace: one that names a program, a path, a module
or a callable is refused (a person sets those with ``tuidebug recompile --set``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from tuidebug.compiler.recompile_spec import RecompileSpec
from tuidebug.errors import TraceError
from tuidebug.trace.format import schema
from tuidebug.mcp.bounded import Answer
from tuidebug.mcp.graphs import diff_answer
from tuidebug.mcp.traces import Traces


class Consent(BaseModel):
    """What the person answers: run it or not, and the trace's risky flags typed by name."""

    run: bool = Field(description="Run it (the plan above)?")
    confirm_flags: str = Field(default="", description=(
        "Flags of the trace that name a program, path, module or callable, typed by name "
        "(comma-separated) to apply them; leave empty to leave them out"))


def _plan(traces: Traces, trace: str, sets: list[str], rank: int | None
          ) -> tuple[str, Any, RecompileSpec, Any]:
    from tuidebug.compiler import recompile as rc
    from tuidebug.compiler.consent import spec_plan
    from tuidebug.compiler.trace_config import check

    parsed = rc.parse_sets(sets)  # UnknownFlag, FlagValueError: said as the tool's error
    _, refused = check(parsed)
    if refused:
        raise TraceError("not set from an MCP client (a person sets it with tuidebug recompile "
                         "--set): " + "; ".join(f"{k}: {why}" for k, why in refused.items()))
    o, t = traces.trace(trace, rank)
    spec = rc.recompile_spec(t.root, parsed)
    return o.handle, t, spec, spec_plan(spec, rc.read_manifest(t.root))


def question(traces: Traces, trace: str, sets: list[str], rank: int | None) -> str:
    """What the person is asked before ``recompile`` runs: the plan, and "Run it?". Raises
    (before anyone is asked) for flags that are unknown, of the wrong type or risky."""
    _, _, _, plan = _plan(traces, trace, sets, rank)
    return "\n".join(plan.lines()) + "\nRun it?"


async def recompile(traces: Traces, trace: str, sets: list[str], rank: int | None,
                    consent: Any, timeout_s: float = 900) -> Answer:
    """Recompile ``trace`` with ``sets`` (``NAME=VALUE``) when the person's answer
    (``consent``: the SDK's elicitation result of :class:`Consent`) is yes; the answer
    compares the new trace with the old (as ``diff``) and names the new trace's handle."""
    import anyio

    handle, t, spec, plan = _plan(traces, trace, sets, rank)
    if getattr(consent, "action", None) != "accept" or not consent.data.run:
        return Answer("recompile", "not run: the user did not agree", handle)
    typed = {n.strip() for n in consent.data.confirm_flags.split(",") if n.strip()}
    spec = spec.confirmed({n: v for n, v in plan.confirm.items() if n in typed})
    out, state, error = await anyio.to_thread.run_sync(_run, spec, timeout_s)
    if not (Path(out) / schema.MANIFEST).exists():
        return Answer("recompile", f"the recompile ended {state} and wrote no trace", handle,
                      {"error": error})
    new = traces.open(str(out))
    ans = diff_answer(handle, t, new.handle, new.rank_trace(None))
    ans.tool = "recompile"
    ans.answer = f"recompiled ({state}) as {new.handle}; {ans.answer}"
    ans.data = {"job": {"state": state, "error": error, "out": str(out)}, **ans.data}
    return ans


def _run(spec: RecompileSpec, timeout_s: float) -> tuple[str, str, str | None]:
    """The recompile job in tuidebug's worker (a child process): (out, state, error)."""
    from tuidebug.compiler.worker import RecompileWorker

    worker = RecompileWorker(warmup=False, timeout=timeout_s, use_cache=True)
    try:
        job = worker.submit_spec(spec)
        job.wait()
    finally:
        worker.close()
    return spec.out, str(job.state), job.error
