"""Which tensors of a recompiled frame the user holds, and how to name them in advice: a
library frame called from inside the library (transformers' loss given the model's ``logits``)
takes tensors the user never holds; one the user's call passes by keyword (``self.m(input_ids=
ids)``) is "the tensor t you pass as input_ids=". No torch."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.attempts import final_attempt
from tuidebug.trace.queries.frames import is_own


# the frame's ``*args`` (``torch.compile`` of a torch module such as ``nn.Sequential`` traces
# Dynamo's own ``inner(*args, **kwargs)`` around its forward): the tensor the user passes there
POSITIONAL = re.compile(r"^args\[(?P<index>\d+)\]$")
_KWARG = re.compile(r"kwargs\['(?P<key>[^'\]]+)'\]")


def held_as(name: str) -> tuple[str, str]:
    """How the user names a tensor Dynamo calls ``name``: (the name to write in a call, the
    words after it) — ``x``; ``t`` "on the tensor t you pass as argument 0" for ``args[0]``;
    ``t`` "on the tensor t you pass as input_ids=" for ``kwargs['input_ids']`` (no one holds a
    variable named ``kwargs['input_ids']``)."""
    pos = POSITIONAL.match(name)
    if pos:
        return "t", f" on the tensor t you pass as argument {pos['index']}"
    kw = _KWARG.fullmatch(name)
    if kw:
        return "t", f" on the tensor t you pass as {kw['key']}="
    return name, ""


@dataclass(frozen=True)
class Frame:
    """A compiled frame: its file and function (``co_filename``, ``co_name``). Where the frame
    is a decorator's wrapper of another function (transformers' ``wrapper`` around a model's
    ``forward``, as the capture recorded it: ``wraps``), the function it wraps: its file and
    name, ``qualname`` (``GPT2LMHeadModel.forward``), ``args`` (its parameters as the
    wrapper's ``*args`` holds them: ``args[0]`` is ``input_ids``), ``passed_from`` (the index
    there of the caller's first positional argument) and ``wrapper`` (the compiled frame's own
    function, ``wrapper``)."""
    file: str
    name: str
    args: tuple[str, ...] = ()
    passed_from: int = 0
    qualname: str = ""
    wrapper: str = ""
    line: int = 0

    def param(self, name: str) -> str | None:
        """The wrapped function's parameter a positional ``args[i]`` of the wrapper is."""
        pos = POSITIONAL.match(name)
        i = int(pos["index"]) if pos else -1
        return self.args[i] if 0 <= i < len(self.args) else None

    def said(self, name: str) -> str:
        """``name`` as advice says it: ``input_ids (args[0])`` for a wrapper's positional."""
        param = self.param(name)
        return f"{param} ({name})" if param else name


class Held(str, Enum):
    """Whether the user holds a tensor of a compiled frame: ``UNKNOWN`` where the trace cannot
    say (a library's ``forward`` that the user's line may or may not call itself: a trace
    made before the capture recorded which)."""
    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class CallArgs:
    """What the user's line passes (``out = model(images, mask=m)``): the call the statement
    makes (the outermost), its callee's last name (``model``) and positional arguments as
    written (``["images"]``), and every keyword any call of the line passes (``{"mask"}``:
    passed on by keyword to the frames it calls)."""
    callee: str
    positional: tuple[str, ...]
    keywords: frozenset[str]

    def calls(self, frame: Frame, called: dict[str, Any]) -> Held:
        """Whether the statement's call runs the frame itself: a function of its name, or
        the forward of the module it calls (``model(x)``). ``called["direct"]`` (the capture's
        ``called_at``): whether only frames that pass the call on (a module's ``__call__``,
        torch.compile's wrappers) stood between the line and the frame — a library's inner
        ``forward`` (a submodule given what the library computed) is not the line's call.
        Not recorded (an older trace): a function named as the line calls it is; a
        ``forward`` is not known to be."""
        direct = called.get("direct")
        if direct is False or frame.name not in (self.callee, "forward"):
            return Held.NO
        if direct is True or frame.name == self.callee:
            return Held.YES
        return Held.UNKNOWN


MAX_LINE = 2_000  # characters of a user's line read for its call's arguments
MAX_DEPTH = 100  # nesting of a user's line read for its call's arguments


def _depth(tree: ast.AST) -> int:
    """How deeply ``tree`` nests, counted without recursing (``ast.unparse`` recurses per
    level, and how far it gets depends on the process's recursion limit: torch raises it)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def call_args(code: str) -> CallArgs | None:
    """The arguments the user's line ``code`` passes, read by Python's parser (never run);
    None when the line is not a whole statement (a call whose arguments go on over lines), or
    too long or too deeply nested to read (the line comes from a trace: a generated or crafted
    line must not crash the advice; the parser recurses per nested term)."""
    code = code.strip()
    if len(code) > MAX_LINE:
        return None
    try:
        tree = ast.parse(code)
        if _depth(tree) > MAX_DEPTH:
            return None
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]  # breadth first
        if not calls:
            return None
        func = calls[0].func
        callee = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else ""
        return CallArgs(callee, tuple(ast.unparse(a) for a in calls[0].args),
                        frozenset(k.arg for c in calls for k in c.keywords if k.arg))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _word(name: str) -> str:
    key = _KWARG.fullmatch(name)
    return key["key"] if key else name


def held_by_user(frame: Frame | None, called: Any, name: str) -> Held:
    """Whether the user holds the tensor a compiled frame calls ``name`` (``x``,
    ``kwargs['input_ids']``): the frame is their own code, or the line of theirs whose call
    recompiled (``called``: ``{file, line, code, direct}``) passes it — by keyword in its
    argument list (``self.m(input_ids=ids)``), or positionally to the frame's own call (``out =
    model(images)`` into the model's ``forward(self, x)``: which position is ``x`` is not
    recorded, so any; ``CallArgs.calls``). A frame of a library called from inside the library
    (a loss function given the model's ``logits``, a submodule's ``forward`` given what the
    model computed) takes tensors the user never holds; where the trace does not say whether
    the line calls the frame itself, ``UNKNOWN``. A line that is no whole statement (``outputs
    = model(`` with its arguments on the lines below) names no arguments: the capture's
    ``direct`` says (the line's own call: held; a frame the library called from inside: not;
    not recorded: not known). A wrapper's positional (``args[0]``) is what the user's call
    passes, unless the library made that call (``direct`` false: ``model.generate(ids)``
    calling the wrapped forward with tensors of its own making)."""
    if frame is None or is_own(frame.file) or not isinstance(called, dict):
        return Held.YES
    if POSITIONAL.match(name):  # Dynamo's inner(*args), a decorator's wrapper(*args)
        return Held.NO if called.get("direct") is False else Held.YES
    passed = call_args(str(called.get("code") or ""))
    if passed is None:
        direct = called.get("direct")
        return Held.YES if direct is True else Held.NO if direct is False else Held.UNKNOWN
    if _word(name) in passed.keywords:
        return Held.YES
    return passed.calls(frame, called) if passed.positional else Held.NO


def _passed_at(frame: Frame, called: dict[str, Any], name: str) -> tuple[str, str] | None:
    """A wrapper's positional ``args[i]`` as the user's line passes it: the argument written
    at its place (``ids`` of ``out = step(ids)``), else the wrapped function's parameter."""
    param = frame.param(name)
    if param is None:
        return None
    at = int(POSITIONAL.match(name)["index"]) - frame.passed_from  # type: ignore[index]
    passed = call_args(str(called.get("code") or ""))
    if passed is not None and 0 <= at < len(passed.positional) \
            and passed.calls(frame, called) is Held.YES \
            and re.fullmatch(r"[A-Za-z_][\w.]*", passed.positional[at]):
        return passed.positional[at], ""
    return "t", (f" on the tensor t you pass as {param} (argument {at} of "
                 f"{frame.qualname or frame.name})")


def as_passed(frame: Frame | None, called: Any, name: str) -> tuple[str, str]:
    """``held_as``, but a library frame's parameter the user's call passes by keyword
    (``self.m(input_ids=ids)`` into GPT-2's forward) is the tensor they pass as ``name=``, and
    one it passes positionally to the frame's own call is the argument they pass (``images``
    of ``model(images)``, the one argument; else "the tensor t you pass for x"), not a
    variable of theirs named ``name``; a call over lines, whose arguments are not read, passes
    "the tensor t you pass for x"."""
    if frame is not None and isinstance(called, dict) and POSITIONAL.match(name):
        return _passed_at(frame, called, name) or held_as(name)
    if frame is None or is_own(frame.file) or not isinstance(called, dict) \
            or POSITIONAL.match(name):
        return held_as(name)
    passed = call_args(str(called.get("code") or ""))
    word = _word(name)
    if passed is None:
        return held_as(name) if _KWARG.fullmatch(name) else \
            ("t", f" on the tensor t you pass for {word}")
    if word in passed.keywords:
        return "t", f" on the tensor t you pass as {word}="
    if passed.calls(frame, called) is not Held.YES:
        return held_as(name)
    if len(passed.positional) == 1 and re.fullmatch(r"[A-Za-z_][\w.]*", passed.positional[0]):
        return passed.positional[0], ""
    if passed.positional:
        return "t", f" on the tensor t you pass for {word}"
    return held_as(name)


def frame_of(trace: Trace, cid: str) -> Frame | None:
    """The frame of compile ``cid`` (its finished attempt's, for one that restarted), and what
    it wraps where the capture recorded that (``wrapped``)."""
    frame = frame_in(*((c or {}).get("metrics") for c in (
        trace.compiles.get(cid), trace.compiles.get(final_attempt(trace.compiles, cid)))))
    recorded = trace.compile_shapes_brief(cid).get("recompile")
    return wrapped(frame, recorded.get("wraps") if isinstance(recorded, dict) else None)


def wrapped(frame: Frame | None, wraps: Any) -> Frame | None:
    """``frame`` as the function it wraps, where ``wraps`` (a recompile's record, from the
    capture: ``{file, line, fn, qualname, args, passed_from}``) names one; else ``frame``."""
    if not isinstance(wraps, dict) or not wraps.get("file") or not wraps.get("fn"):
        return frame
    args = wraps.get("args")
    start = wraps.get("passed_from")
    return Frame(str(wraps["file"]), str(wraps["fn"]),
                 tuple(str(a) for a in args) if isinstance(args, list) else (),
                 start if isinstance(start, int) and not isinstance(start, bool) else 0,
                 str(wraps.get("qualname") or ""), frame.name if frame else "",
                 line if isinstance(line := wraps.get("line"), int) else 0)


def frame_in(*metrics: Any) -> Frame | None:
    """The frame the first of ``metrics`` (a compile's) that names a file names."""
    for m in metrics:
        if isinstance(m, dict) and m.get("co_filename"):
            return Frame(str(m["co_filename"]), str(m.get("co_name") or ""))
    return None
