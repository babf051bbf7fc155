"""Guards as data: Dynamo's guard tree (the text of ``dynamo_cpp_guards_str``) parsed into
guards (kind, source, code, the user line that added it), and the guards of a compile grouped
by the input they check. Plain text parsing: nothing is evaluated (the text may come from an
untrusted trace or log), and every line is read in linear time (no pattern that backtracks over
a line: a 150 KB guard line is read as fast as a short one)."""

from __future__ import annotations

import re
from typing import Any, Iterable

MAX_GUARDS = 5000  # a guard tree longer than this is cut (the file says how many were left)

_LINE = re.compile(r"^(?P<indent>(?:\| )*)\+- (?P<body>.*)$")
_MANAGER = re.compile(r"^(?:\w*GuardManager|RootGuardManager)\b:?(?P<rest>.*)$")
_KIND = re.compile(r"^(?P<kind>[A-Z][A-Z0-9_]+): (?P<code>.*)$")
# "  # <user code>  # <file>:<line> in <function>" after the guard's code: what follows the
# second '#' (matched where it starts: each try reads one word)
_WHERE = re.compile(r"\s+(?P<file>[^\s#]+):(?P<line>[0-9]{1,9}) in (?P<fn>[\w<>.]+)")
_FRAMEWORK = re.compile(r"^(?:_dynamo|_inductor|_functorch|fx|_subclasses|_guards)/")
_SOURCE = re.compile(r"(?:[LG]\['[^'\]]*'\](?:\.\w+|\[[^\]]*\])*(?:\(\))?(?:\[\d+\])?)")


def _split_comment(text: str) -> tuple[str, str]:
    """A guard's code and the comment after it (Dynamo aligns it with two or more spaces):
    the first ``#`` after two blanks."""
    i = text.find("#")
    while i != -1:
        if i >= 2 and text[i - 1].isspace() and text[i - 2].isspace():
            return text[:i].strip(), text[i:].strip()
        i = text.find("#", i + 1)
    return text.strip(), ""


def _manager_source(rest: str) -> str | None:
    """``source=…, accessed_by=`` of a GuardManager line."""
    i = rest.find("source=")
    j = rest.find(", accessed_by=", i + 8) if i != -1 else -1
    return rest[i + 7:j] if j != -1 else None


def _user_line(comment: str) -> dict[str, Any] | None:
    """``# <code>  # <file>:<line> in <fn>``: the first ``#`` after the code's ``#`` that is
    followed by a user line."""
    first = comment.find("#")
    k = comment.find("#", first + 1) if first != -1 else -1
    while k != -1:
        m = _WHERE.match(comment, k + 1)
        if m and comment[k - 1].isspace():
            if _FRAMEWORK.match(m["file"]):
                return None
            return {"file": m["file"], "line": int(m["line"]), "fn": m["fn"],
                    "code": comment[first + 1:k].strip()}
        k = comment.find("#", k + 1)
    return None


def code_source(code: str) -> str | None:
    """The first input a guard's code names (``L['x']``, ``L['x'].size()[0]``, ``G['w']``)."""
    m = _SOURCE.search(code)
    return m.group(0) if m else None


def parse_guard_tree(text: str) -> tuple[list[dict[str, Any]], int]:
    """Every guard of a guard tree: ``{kind, source, code, user_line}`` (``source``: the input
    the enclosing GuardManager checks, else the first one the code names). Returns the guards
    and how many more there were beyond ``MAX_GUARDS``."""
    guards: list[dict[str, Any]] = []
    dropped = 0
    sources: list[str | None] = []  # the source of the GuardManager at each depth
    for raw in str(text or "").splitlines():
        m = _LINE.match(raw.rstrip())
        if not m:
            continue
        depth = len(m["indent"]) // 2
        body = m["body"]
        del sources[depth:]
        man = _MANAGER.match(body)
        if man:
            sources.extend([None] * (depth - len(sources)))
            sources.append(_manager_source(man["rest"]))
            continue
        km = _KIND.match(body)
        if not km:
            continue
        if len(guards) >= MAX_GUARDS:
            dropped += 1
            continue
        code, comment = _split_comment(km["code"])
        enclosing = next((s for s in reversed(sources) if s), None)
        guards.append({"kind": km["kind"], "source": enclosing or code_source(code),
                       "code": code, "user_line": _user_line(comment)})
    return guards, dropped


def by_source(guards: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Guards grouped by the input they check, inputs in order of first appearance; guards
    on no input (global state, the default device …) under ``"(global)"``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for g in guards:
        key = _tensor_of(str(g.get("source") or "")) or "(global)"
        out.setdefault(key, []).append(g)
    return out


def _tensor_of(source: str) -> str:
    """``L['x'].size()[0]`` -> ``L['x']`` (the input a size source belongs to)."""
    m = re.match(r"^([LG]\['[^'\]]*'\](?:\.[A-Za-z_]\w*\b(?!\()|\[[^\]]*\])*)", source)
    return m.group(1) if m else source


def render_range(name: str, lower: Any, upper: Any) -> str:
    """``2 <= s0 <= 1024``; an unbounded side left out; one value: ``Eq(s0, 8)``."""
    lo = None if str(lower) in ("-int_oo", "-oo") else lower
    hi = None if str(upper) in ("int_oo", "oo") else upper
    if lo is not None and lo == hi:
        return f"Eq({name}, {lo})"
    return " <= ".join(str(p) for p in (lo, name, hi) if p is not None)


def with_sources(expr: str, symbols: dict[str, str]) -> str:
    """``expr`` with each symbol (``s0``, ``u1``) replaced by the input it stands for
    (``symbols``: name -> source); a symbol without a source stays as it is."""
    if not symbols:
        return expr
    return re.sub(r"\b([su]\d+)\b", lambda m: symbols.get(m.group(1), m.group(1)), expr)
