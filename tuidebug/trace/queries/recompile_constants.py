"""A recompile on a Python number or bool the compile held as a constant (``n == 2``,
``scale == 2.0``, ``kwargs['cache'].is_updated[0] == False``, ``G['scale'] == 2.0``): what the
compile made of it — a symbol (automatic dynamic), a symbol the code specialized again (a loop
over ``range(n)`` needs the value: ``Eq(s86, 3)``), or a constant still — and what would avoid
it. Read from the failed guard's text and the compile's shapes record (its ``symbols`` and
``specializations``). Plain text matching: nothing from the trace is evaluated."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuidebug.trace.queries.graph_breaks import SourceLine

_PATH = r"(?:\.\w+|\[[^\]\n]*\])*"
# ``n == 2``, ``scale == 2.0`` (torch 2.13 names the local), ``L['n'] == 2`` (as older logs
# do), a global ``G['scale'] == 2.0``; and one held by an object, read through it
# (``kwargs['past_key_values'].is_updated[0] == False``)
CONSTANT = re.compile(rf"(?:L\['(?P<local>[^'\]]+)'\](?P<lpath>{_PATH})|"
                      rf"G\['(?P<glob>[^'\]]+)'\](?P<gpath>{_PATH})|"
                      rf"(?P<name>[A-Za-z_]\w*)(?P<path>{_PATH})) == "
                      r"(?P<value>-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|inf|nan)|True|False|"
                      r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\")")


@dataclass(frozen=True)
class Specialized:
    """A symbol the compile made for an input and then fixed to one ``value`` because the
    code needed it (``guard``: ``Eq(s86, 3)``; ``at``: the user line that did, None when not
    recorded)."""

    value: Any
    guard: str | None
    at: SourceLine | None

    def said(self) -> str:
        """``3 (Eq(s86, 3)) at loopn.py:5 `for _ in range(n):```"""
        return (f"{self.value}" + (f" ({self.guard})" if self.guard else "")
                + (f" at {self.at.where} `{self.at.code}`" if self.at else ""))


def specialized_sources(shapes: Mapping[str, Any] | None) -> dict[str, Specialized]:
    """The sources a compile's shapes record (``compiles/<id>.shapes.json``) says it
    specialized, each with its specialization: by the ``specializations`` records, and a
    symbol replaced by a constant."""
    out: dict[str, Specialized] = {}
    for sp in (shapes or {}).get("specializations") or []:
        if not isinstance(sp, dict):
            continue
        line = sp.get("user_line")
        at = (SourceLine(str(line.get("file") or "?"), line["line"], str(line.get("fn") or ""),
                         str(line.get("code") or "").strip())
              if isinstance(line, dict) and type(line.get("line")) is int else None)
        for src in [sp.get("source"), *(sp.get("sources") or [])]:
            if src:
                out.setdefault(str(src), Specialized(sp.get("value"), sp.get("guard"), at))
    for sym in (shapes or {}).get("symbols") or []:
        if isinstance(sym, dict) and re.fullmatch(r"-?\d+(?:\.\d*)?", str(sym.get("replaced_by"))):
            for src in [sym.get("source"), *(sym.get("sources") or [])]:
                if src:
                    out.setdefault(str(src), Specialized(sym.get("replaced_by"), None, None))
    return out


def symbolic_sources(shapes: Mapping[str, Any] | None) -> set[str] | None:
    """The sources a compile holds as symbols (None: no shapes record): each symbol's, but one
    the compile specialized again is a constant, not a symbol."""
    if not shapes:
        return None
    fixed = specialized_sources(shapes)
    return {str(x) for sym in shapes.get("symbols") or [] if isinstance(sym, dict)
            for x in [sym.get("source"), *(sym.get("sources") or [])] if x} - set(fixed)


def carried(name: str) -> str:
    if name.startswith("___stack"):  # Dynamo's name for a value on the stack at the break
        return (f"{name!r} is the value your line was computing when the graph broke (Dynamo "
                f"hands it to the code it resumes after the break), not an input you pass "
                f"yourself")
    return (f"{name!r} is a local your function carries across a graph break into the code "
            f"Dynamo resumes after it, not an input you pass yourself")


def constant_advice(m: re.Match[str], symbolic: set[str] | None,
                    specialized: Mapping[str, Specialized], resumed: bool,
                    config: Mapping[str, Any] | None = None
                    ) -> tuple[str, str | None, Any, Any]:
    """What would avoid a recompile on the constant ``m`` (a ``CONSTANT`` match): (advice, its
    source, the value compiled for, the value that failed it: None, the guard does not say).
    ``symbolic``: the sources the compile holds as symbols, specialized ones left out (None:
    not known); ``specialized``: the sources it specialized; ``config``: the compile's Dynamo
    config as the trace recorded it ({}: not recorded). Four values of ``n`` in ``x * n``
    compiled on torch 2.13: 2 times by default (automatic dynamic), 1 with dynamic=True; 4 with
    automatic_dynamic_shapes=False (1 with dynamic=True); 4 with specialize_int=True (and
    specialize_float=True for a float), dynamic=True or not."""
    config = config or {}
    if m["glob"]:
        name, source = m["glob"] + m["gpath"], f"G['{m['glob']}']{m['gpath']}"
    else:
        head, path = (m["local"], m["lpath"]) if m["local"] else (m["name"], m["path"])
        name, source = head + path, f"L['{head}']{path}"
    value = m["value"]
    # read through an object, or a global: not an argument the user passes
    held = bool(m["lpath"] or m["path"] or m["glob"])
    if value in ("True", "False"):
        # the guard says only that the value is not ``value`` now: None, another object…
        return (f"the Python bool {name!r} changed (it was {value}): a bool is always a "
                f"constant of the compile, so each value is compiled once: a flag that flips "
                f"once (a cache marked filled after its first call) costs one compile, and "
                f"dynamic=True does not change that", source, value, None)
    if value[:1] in "'\"":
        return (f"the Python str {name!r} is a constant of the compile and changed (it was "
                f"{value}): each string compiles once, whatever is dynamic; past "
                f"torch._dynamo.config.recompile_limit of them the function runs eagerly: "
                f"keep the strings few, or branch on them outside the compiled function",
                source, value, None)
    number = "int" if re.fullmatch(r"-?\d+", value) else "float"
    head = f"the Python {number} {name!r} is a constant of the compile and its value changed: "
    tensor = ", or pass it as a tensor" if number == "float" and not held else ""
    fixed = specialized.get(source)
    if fixed is not None:
        return (head + f"this compile made it a symbol, then specialized it to {fixed.said()}: "
                f"the code there needs its value (a loop count or a branch on it, say), so "
                f"each value compiles once, and torch.compile(dynamic=True) does not change "
                f"that", source, value, None)
    is_symbol = None if symbolic is None else source in symbolic
    knob = f"specialize_{number}"
    if config.get(knob) is True and not is_symbol:
        return (head + f"torch._dynamo.config.{knob} is True here, so every {number} is a "
                f"constant of the compile: each value compiles once, and "
                f"torch.compile(dynamic=True) does not change that"
                + ("" if held else f"; set torch._dynamo.config.{knob} = False (the default) "
                   f"to let automatic dynamic make it a symbol" + tensor),
                source, value, None)
    if config.get("automatic_dynamic_shapes") is False and not is_symbol:
        return (head + "automatic dynamic shapes are off here (torch.compile(dynamic=False) or "
                "torch._dynamo.config.automatic_dynamic_shapes=False), so it stays a constant "
                "and every new value compiles again"
                + ("" if held else
                   "; to compile once, use torch.compile(dynamic=True) (unless the code needs "
                   "its value, as a loop count does), or turn automatic dynamic back on (drop "
                   "dynamic=False, or automatic_dynamic_shapes=True), which makes it a symbol "
                   "after one more value" + tensor),
                source, value, None)
    if is_symbol is False:
        return (head + "this compile did not make it a symbol: each value compiles once"
                + tensor, source, value, None)
    made = ("this compile makes it a symbol (automatic dynamic), so later values reuse it"
            if is_symbol else
            "automatic dynamic makes it a symbol after one change"
            + ("" if config.get(knob) is False else
               f" unless torch._dynamo.config.{knob} is True"))
    if held and not is_symbol:
        return head + made, source, value, None
    # not known whether the compile made it a symbol (no shapes record): dynamic=True helps
    # only where the code does not need the value (a loop count specializes it again)
    unless = "" if is_symbol else " (unless the code needs its value, as a loop count does)"
    return (head + f"{made}; to compile once, use torch.compile(dynamic=True){unless}"
            + tensor + (f" ({carried(name)})" if resumed and not held else ""),
            source, value, None)
