"""Each recompile explained: which compile it follows, the guard that failed, the value that
failed it, and what would avoid it (``recompile_suggestion``) — and the recompile limit being
hit, as its own error.

Read from what a trace keeps per compile (``compiles/<id>.json``: the recompile reasons,
the compile's metrics and Dynamo config; ``compiles/<id>.shapes.json``: the inputs' values the
failed guards name). Plain text matching (``failed_guard``): nothing from the trace is
evaluated."""

from __future__ import annotations

import re
from typing import Any

from tuidebug.trace.format import safefile
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries import attempts, static_kv
from tuidebug.trace.queries.changed_with import (held_differently, new_input_dims,
                                                  unmarked_changes)
from tuidebug.trace.queries.failed_guard import (KWARGS_COUNT, PREFIX, TENSOR, guard_of,
                                                 local_source, reasons_of)
from tuidebug.trace.queries.held import frame_in, wrapped
from tuidebug.trace.queries.recompile_constants import specialized_sources, symbolic_sources
from tuidebug.trace.queries.recompile_suggestion import suggestion

# the code Dynamo resumes after a graph break is a function of its own; its inputs are the
# locals the break carried over, not arguments the user passes
RESUME = re.compile(r"^torch_dynamo_resume_in_")
_LIMIT = re.compile(r"recompile limit|cache_size_limit|recompile_limit", re.I)
# which limit Dynamo says was hit ("Limit type: accumulated_recompile_limit", "hit
# config.recompile_limit") and its value then ("currently set to 8")
_LIMIT_TYPE = re.compile(r"\b(accumulated_recompile_limit|accumulated_cache_size_limit|"
                         r"recompile_limit|cache_size_limit)\b")
_LIMIT_VALUE = re.compile(r"currently set to (\d+)")
_OLD_NAME = {"recompile_limit": "cache_size_limit",
             "accumulated_recompile_limit": "accumulated_cache_size_limit"}


def previous_compile(cid: str, compiles: dict[str, Any]) -> str | None:
    """The compile of the same frame just before ``cid`` as Dynamo names it in a recompile
    reason (``3/2`` -> ``3/1``; ``3/1``'s last restart when only that is recorded).
    ``attempts.final_attempt`` of it made the graph."""
    m = re.fullmatch(r"(?P<pre>!?(?:\d+/)?\d+/)(?P<n>\d+)", attempts.first_attempt(cid))
    if not m or int(m["n"]) == 0:
        return None
    base = f"{m['pre']}{int(m['n']) - 1}"
    later = attempts.restarts(compiles, base)
    return base if base in compiles or not later else later[-1]


def compile_config(compiles: dict[str, Any], cid: str) -> dict[str, Any]:
    """Compile ``cid``'s Dynamo config as the trace recorded it ({}: not recorded); a first
    attempt that restarted has none of its own: its finished attempt's."""
    return (_config(compiles.get(cid) or {})
            or _config(compiles.get(attempts.final_attempt(compiles, cid)) or {}))


def _config(detail: dict[str, Any]) -> dict[str, Any]:
    text = (detail.get("metrics") or {}).get("dynamo_config")
    if isinstance(text, str):
        try:
            value = safefile.loads(text)
            return value if isinstance(value, dict) else {}
        except ValueError:
            return {}
    return text if isinstance(text, dict) else {}


def explain(cid: str, compiles: dict[str, dict[str, Any]],
            shapes: dict[str, Any] | None = None, held: dict[str, Any] | None = None,
            also: list[str] | None = None, new_dims: list[tuple[str, int]] | None = None
            ) -> dict[str, Any] | None:
    """Why compile ``cid`` happened when it is a recompile (None when it is not): ``previous``
    (the compile it follows), ``failed_guard`` (the failed guard, as Dynamo words it),
    ``guard_of`` (whose guard it was), ``source``, ``expected``, ``failing_value``,
    ``suggestion``, ``limit_hit`` (with ``limit``: the recompile limit reached), ``reasons``
    (every reason given, one per compile of the frame, as Dynamo wrote it), ``called_at`` (the
    user's line whose call recompiled: ``{file, line, fn, code}``, None where the capture did
    not record it; for ``resumed`` code, the code Dynamo resumes after a graph break, the line
    of that break), ``guard_at`` (the user line the failed guard names, None when it names
    none). ``failed_guard`` is the guard alone, without the comment and stack Dynamo adds.
    ``shapes``: the compile's own shapes record (the recompile Dynamo was asked for: its
    reasons, failing values, call site); ``held``: its finished attempt's
    (``attempts.held_shapes``: what it made a symbol or specialized), ``shapes`` when None —
    ``explain_compile`` passes both, and ``also`` and ``new_dims`` (``suggestion``'s)."""
    detail = compiles.get(cid) or {}
    # a first attempt that restarted has no metrics of its own: its config and code object
    # are its finished attempt's
    finished = compiles.get(attempts.final_attempt(compiles, cid)) or {}
    recorded = (shapes or {}).get("recompile") or {}
    listed = recorded.get("reasons")
    reasons = reasons_of(detail) or [str(r) for r in (listed if isinstance(listed, list) else [])]
    metrics = detail.get("metrics") or {}
    fail = f"{metrics.get('fail_type') or ''} {metrics.get('fail_reason') or ''}"
    limit_hit = bool(_LIMIT.search(fail)) and ("exceeded" in fail or "hit" in fail
                                               or "FailOnRecompileLimitHit" in fail)
    if not reasons and not limit_hit:
        return None
    prev = previous_compile(cid, compiles)
    parsed = []
    for r in reasons:
        m = PREFIX.match(r)
        parsed.append((m["cid"], m["text"].strip()) if m else (None, r.strip()))
    of, text = next(((c, t) for c, t in parsed if c == prev), parsed[0] if parsed
                    else (None, ""))
    config = compile_config(compiles, cid)
    held = shapes if held is None else held
    symbols = [sym for rec in (held, shapes) for sym in (rec or {}).get("symbols") or []
               if isinstance(sym, dict)]
    # a symbol the compile specialized again (``Eq(s86, 3)``) is a constant, not a symbol
    symbolic = symbolic_sources(held)
    resumed = bool(RESUME.match(str(metrics.get("co_name")
                                    or (finished.get("metrics") or {}).get("co_name") or "")))
    seen = {f"{local_source(t['name'])}.{t['what']}()[{t['index']}]": t["actual"]
            for t in (TENSOR.search(x) for _, x in parsed) if t}
    wider = _wider(parsed, (of, text))
    # the compile a mark would let serve this call (``advice`` asks the same): the earlier one
    # that held another size where the one before held 0 or 1, else the one before
    t = TENSOR.search(text)
    serving = wider[-1][0] if t and t["expected"] in ("0", "1") and wider else prev
    # the compiled frame, or the function it wraps (a model's forward under transformers'
    # decorators), as the capture recorded it
    frame = wrapped(frame_in(metrics, finished.get("metrics")), recorded.get("wraps"))
    other = held_differently(compiles, serving, cid)
    also = (also or []) + other
    advice, source, expected, actual = suggestion(
        text, config, symbolic, resumed, seen, specialized_sources(held),
        wider, frame, recorded.get("called_at"),
        static_kv.is_static(detail, (held, shapes))
        or static_kv.is_static(compiles.get(prev or "") or {}, ()), also, other, new_dims
    ) if text else ("", None, None, None)
    values = recorded.get("values") if isinstance(recorded.get("values"), dict) else {}
    failing = values.get(source) if source else None
    if failing is None and actual is None and source:
        # a number the compile made a symbol: the value it was traced with is its hint
        failing = next((sym.get("hint") for sym in symbols if sym.get("source") == source
                        and sym.get("hint") is not None), None)
    guard, guard_at = guard_of(text) if text else ("", None)
    if advice and KWARGS_COUNT.fullmatch(guard):
        # the compile before was made for other keywords (generate()'s prompt, then each new
        # token): the latest guard of another kind that failed (a size of the calls made with
        # these keywords, say) is said too
        same = next(((c, guard_of(t)[0]) for c, t in parsed
                     if c and not KWARGS_COUNT.fullmatch(guard_of(t)[0])), None)
        if same:
            advice += f"; another compile's guard failed too, {same[0]}'s: {same[1]}"
    called = recorded.get("called_at")
    out = {"previous": prev, "guard_of": of, "failed_guard": guard or None,
           "guard_at": guard_at, "source": source, "expected": expected,
           "failing_value": failing if failing is not None else actual,
           "suggestion": advice or None, "limit_hit": limit_hit, "reasons": reasons,
           "resumed": resumed, "wider": [{"compile": c, "size": e} for c, e in wider],
           "called_at": called if isinstance(called, dict) and called.get("line") else None,
           "wraps": ({"function": frame.qualname or frame.name, "file": frame.file,
                      "line": frame.line or None, "wrapper": frame.wrapper}
                     if frame is not None and frame.wrapper else None)}
    if limit_hit:
        # the per-function limit, or the accumulated one (every compile of the code object):
        # the one Dynamo names, with the value it gives
        named = _LIMIT_TYPE.search(fail)
        knob = named.group(1) if named else "recompile_limit"
        knob = {v: k for k, v in _OLD_NAME.items()}.get(knob, knob)
        given = _LIMIT_VALUE.search(fail)
        limit = (int(given.group(1)) if given else
                 config.get(knob) or config.get(_OLD_NAME.get(knob, knob)))
        out["limit"] = limit
        out["limit_name"] = knob
        out["suggestion"] = (
            f"the recompile limit (torch._dynamo.config.{knob} = {limit}) was hit: "
            "from here on this function runs without compiling (eager). "
            + (f"Avoid the recompiles: {advice}; " if advice else "")
            + f"or raise torch._dynamo.config.{knob} if they are expected")
    return out


def _wider(parsed: list[tuple[str | None, str]], chosen: tuple[str | None, str]
           ) -> list[tuple[str, str]]:
    """The other failed guards on the size ``chosen`` names, from compiles that held it at a
    size other than 0 or 1: (compile id, size), oldest first."""
    m = TENSOR.search(chosen[1])
    if m is None:
        return []
    out = []
    for c, t in parsed:
        o = TENSOR.search(t)
        if ((c, t) != chosen and c and o and (o["name"], o["what"], o["index"]) ==
                (m["name"], m["what"], m["index"]) and o["expected"] not in ("0", "1")):
            out.append((c, o["expected"]))
    return out[::-1]


def explain_compile(trace: Trace, cid: str) -> dict[str, Any] | None:
    """``explain`` of compile ``cid`` of ``trace``: its own record for what Dynamo was asked, its
    finished attempt's for what the compile did (a recompile whose analysis restarted)."""
    before = previous_compile(cid, trace.compiles)
    return explain(cid, trace.compiles, trace.compile_shapes_brief(cid),
                   attempts.held_shapes(trace, cid), unmarked_changes(trace, cid, before),
                   new_input_dims(trace, cid, before))
