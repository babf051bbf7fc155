"""Display strings of a trace's summary: a kernel's launch, the phase an error happened in, a
compile's cache use, the rows and verdict of an eager accuracy check. Text only: callers show it
through the inert renderer (``tuidebug.inert``)."""

from __future__ import annotations

from typing import Any

from tuidebug.trace.queries.summary import cache_counts


def launch_text(launch: dict[str, Any], *, brief: bool = False) -> str:
    """``grid 16×1×1  (-((xnumel) // -(128)), 1, 1)  XBLOCK=128  4 warps  1 stage  28 regs
    0 spills  0 B shared``; ``brief``: grid, warps and registers (and spills, if any)."""
    parts = []
    grid = launch.get("grid") if isinstance(launch.get("grid"), list) else None
    expr = launch.get("grid_expr") if isinstance(launch.get("grid_expr"), list) else None
    if grid:
        parts.append("grid " + "×".join(str(x) for x in grid))
    # the expression says how the grid follows the sizes; a template's fixed grid (_grid_0…)
    # and constants say nothing more than the values
    if not brief and expr and any(str(e) not in ("1", str(v)) and not str(e).startswith("_grid_")
                                  for e, v in zip(expr, grid or [None] * 3)):
        parts.append("(" + ", ".join(str(e) for e in expr) + ")")
    cfg = launch.get("config")
    if not brief:
        parts += [f"{k}={v}" for k, v in (cfg.items() if isinstance(cfg, dict) else ())]
    keys = (("num_warps", "warp"), ("registers", "reg")) if brief else (
        ("num_warps", "warp"), ("num_stages", "stage"), ("registers", "reg"), ("spills", "spill"))
    for key, unit in keys:
        if launch.get(key) is not None:
            parts.append(f"{launch[key]} {unit}{'' if launch[key] == 1 else 's'}")
    if brief and launch.get("spills"):
        parts.append(f"{launch['spills']} spills")
    if not brief and launch.get("shared_mem") is not None:
        parts.append(f"{launch['shared_mem']} B shared")
    return ("  " if not brief else " · ").join(parts)


def phase_text(phase: str | None) -> str:
    """``in phase 'lowering'``, or ``before compiling started`` when no phase was reached."""
    return f"in phase {phase!r}" if phase else "before compiling started"


def cache_text(counts: dict[str, dict[str, int]]) -> str:
    """:func:`cache_counts` in a few words: ``fx_graph hit×2, aotautograd hit``; ``–`` when
    no cache was looked up."""
    return ", ".join(f"{cache} {result}" + (f"×{n}" if n > 1 else "")
                     for cache, by_result in counts.items()
                     for result, n in by_result.items() if n) or "–"


def compile_cache(c: dict[str, Any]) -> str:
    """A compile's cache use in a few words (``fx_graph miss×2``)."""
    return cache_text(cache_counts(c))


ACCURACY_COLUMNS = ("out", "dtype", "shape", "compiled↔fp64", "eager↔fp64", "rule", "")


def _num(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else "—"


def accuracy_verdict(check: dict[str, Any]) -> tuple[str, str]:
    """(``match`` | ``MISMATCH`` | ``not compared``, why) of one eager check of runtime.json
    (its fields are described in docs/trace-format.md); text only, shown inert by callers."""
    if check.get("skipped"):
        text = str(check["skipped"])
        return "not compared", text.removeprefix("not compared: ")
    if check.get("close") is None:
        return "not compared", "no verdict recorded"
    why = str(check.get("detail") or "")
    if check.get("rule"):
        why = f"{why} (rule {check['rule']}" + (f"; reference {check['reference']}"
                                                if check.get("reference") else "") + ")"
        # outputs the float64 run gave in another dtype (a graph that casts): said, so the
        # reference is not taken to cover them
        grads = check.get("gradients") if isinstance(check.get("gradients"), dict) else {}
        apart = [o for o in (check.get("outputs") or []) + (grads.get("outputs") or [])
                 if isinstance(o, dict) and o.get("no_fp64")]
        by_why: dict[str, list[str]] = {}
        for o in apart:
            by_why.setdefault(str(o["no_fp64"]), []).append(
                str(o.get("name") or f"output {o.get('index', '?')}"))
        said = []
        for reason, who in by_why.items():
            names = ", ".join(who[:3]) + (f" and {len(who) - 3} more" if len(who) > 3 else "")
            said.append(f"{'no float64 reference ' if not said else ''}for {names}: {reason}")
        if said:
            why = f"{why}; " + "; ".join(said)
    elif check.get("max_abs") is not None:  # a trace from before the judge
        why = f"max abs err {_num(check.get('max_abs'))}, max rel err {_num(check.get('max_rel'))}"
    grads = check.get("gradients")
    if isinstance(grads, dict) and grads.get("skipped"):
        why = f"{why}; gradients not judged: {grads['skipped']}"
    elif isinstance(grads, dict) and isinstance(grads.get("outputs"), list):
        n = len(grads['outputs'])
        why = f"{why}; {n} gradient{'s' if n != 1 else ''} judged"
    return ("match" if check["close"] else "MISMATCH"), why.strip()


_MARKS = "¹²³⁴⁵⁶⁷⁸⁹"


def _judged(check: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """(each judged output and gradient, the reference its side of the check names)."""
    grads = check.get("gradients") if isinstance(check.get("gradients"), dict) else {}
    return [(o, str(side.get("reference") or "")) for side in (check, grads)
            for o in side.get("outputs") or [] if isinstance(o, dict)]


def _why_no_reference(o: dict[str, Any], reference: str) -> str:
    """Why an output's errors against float64 are none ("" where they are numbers)."""
    if isinstance(o.get("err_compiled"), (int, float)) or not o.get("rule"):
        return ""
    if o["rule"] == "exact":
        return "integers and bools are compared with eager exactly"
    if o["rule"] in ("shape", "dtype"):
        return f"a {o['rule']} other than eager's: no values compared"
    if o.get("no_fp64"):
        return str(o["no_fp64"])
    if reference.startswith("eager only: "):
        return reference.removeprefix("eager only: ")
    return "no float64 reference recorded"


def accuracy_notes(check: dict[str, Any]) -> list[tuple[str, str]]:
    """(mark, why) for each reason an output of ``accuracy_rows`` shows ``—`` against float64
    (its rows carry the mark: a dash is never left unexplained); none for a trace from before
    the judge."""
    if not check.get("rule"):
        return []
    whys: list[str] = []
    for o, ref in _judged(check):
        why = _why_no_reference(o, ref)
        if why and why not in whys:
            whys.append(why)
    return [(_MARKS[min(i, len(_MARKS) - 1)], w) for i, w in enumerate(whys)]


def accuracy_rows(check: dict[str, Any], limit: int = 12) -> list[tuple[str, ...]]:
    """One row per output of an eager check (``ACCURACY_COLUMNS``): the failing outputs first,
    at most ``limit`` (then a row saying how many more); none for a trace from before the judge
    (no ``rule``). An error against float64 that is none reads ``—`` with the mark of its
    reason in ``accuracy_notes``."""
    if not check.get("rule"):
        return []
    marks = {why: mark for mark, why in accuracy_notes(check)}
    outs = _judged(check)
    outs.sort(key=lambda o: o[0].get("ok") is not False)
    rows = []
    for o, ref in outs[:limit]:
        shape = o.get("shape") if isinstance(o.get("shape"), list) else []
        name = o.get("name") or f"output {o.get('index', '?')}"  # a trace from before names
        mark = marks.get(_why_no_reference(o, ref), "")
        rows.append((str(name), str(o.get("dtype") or "?"),
                     "[" + ",".join(str(n) for n in shape) + "]",
                     _num(o.get("err_compiled")) + mark, _num(o.get("err_eager")) + mark,
                     str(o.get("rule") or "?"),
                     "ok" if o.get("ok") else ("FAIL" if o.get("ok") is False else "?")))
    if len(outs) > limit:
        rows.append((f"… {len(outs) - limit} more", "", "", "", "", "", ""))
    return rows
