"""A size the user marked dynamic (``torch._dynamo.mark_dynamic``) that the code specialized:
Dynamo refuses such a compile (ConstraintViolationError, raised into the script by
torch.compile). What to change, from the compile's specializations (``dynamic``): mark it with
``maybe_mark_dynamic`` (dynamic where the code allows it) or drop the mark, or make the line
that needs the value not need it. A change to the user's code: listed, not tried. No torch."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.changed_with import input_name  # noqa: F401 (advice names it here)
from tuidebug.trace.queries.dynamic import compile_dynamic, marked_sources
from tuidebug.trace.queries.held import held_as


@dataclass(frozen=True)
class MarkedAdvice:
    """One marked size specialized: ``id`` (``maybe_mark_dynamic x 0``), ``text`` (what to
    change), ``why`` (the compile, the line, the guard)."""

    id: str
    text: str
    why: str


def marked_advice(trace: Trace) -> list[MarkedAdvice]:
    """One per (input, dimension) marked dynamic that a compile specialized, the first compile
    that did so. Only a compile whose failure names a mark is read (its shapes and FX
    snapshot): this runs in every ``suggestions()``, on traces of thousands of compiles."""
    out: dict[str, MarkedAdvice] = {}
    for cid, detail in trace.compiles.items():
        if not marked_sources(detail):
            continue
        for sp in compile_dynamic(trace, cid)["specializations"]:
            m = re.fullmatch(r"(?P<src>.+)\.size\(\)\[(?P<dim>\d+)\]", str(sp.get("source")))
            if not sp.get("marked_dynamic") or m is None:
                continue
            name, dim = input_name(m["src"]), int(m["dim"])
            key = f"maybe_mark_dynamic {name} {dim}"
            if key in out:
                continue
            ul = sp.get("user_line") or {}
            at = (f"{str(ul.get('file')).rsplit('/', 1)[-1]}:{ul.get('line')}"
                  if ul.get("file") else None)
            code = f" `{ul['code']}`" if ul.get("code") else ""
            var, phrase = held_as(name)
            text = (f"mark dimension {dim} of {name} with torch._dynamo.maybe_mark_dynamic("
                    f"{var}, {dim}){phrase} instead of mark_dynamic, or drop the mark: it "
                    "then stays dynamic where the code allows it"
                    + (f"; to keep it dynamic everywhere, {at} must not need its value"
                       if at else ""))
            why = (f"{cid}: dimension {dim} of {name} is marked dynamic, and "
                   + (f"{at}{code}" if at else "the code")
                   + f" specialized it to {sp.get('value')} ({sp.get('guard')}): Dynamo "
                   "refuses such a compile (ConstraintViolationError), and torch.compile "
                   "raises it")
            out[key] = MarkedAdvice(key, text, why)
    return list(out.values())
