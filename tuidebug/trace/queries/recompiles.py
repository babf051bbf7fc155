"""Each recompile explained: which compile it follows, the guard that failed, the value that
failed it, and what would avoid it (``mark_dynamic``, ``maybe_mark_dynamic``,
``dynamic=True``, a config knob) — and the recompile limit being hit, as its own error.

Read from what a trace keeps per compile (``compiles/<id>.json``: the recompile reasons,
the compile's metrics and Dynamo config; ``compiles/<id>.shapes.json``: the inputs' values the
failed guards name). Plain text matching: nothing from the trace is evaluated."""

from __future__ import annotations

import ast
import re
from typing import Any

from tuidebug.trace.format import safefile
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries import attempts, static_kv
from tuidebug.trace.queries.changed_with import held_differently, said, unmarked_changes
from tuidebug.trace.queries.held import (  # noqa: F401
    POSITIONAL, Frame, Held, as_passed, frame_in, held_as, held_by_user, wrapped)
from tuidebug.trace.queries.recompile_constants import (
    CONSTANT, Specialized, carried, constant_advice, specialized_sources, symbolic_sources)

_PREFIX = re.compile(r"^\s*(?P<cid>!?\d+/\d+(?:_\d+)?(?:/\d+)?): (?P<text>.*)$", re.S)
# a tensor's name may hold quotes itself: tensor 'kwargs['input_ids']' (passed by keyword)
_TENSOR = re.compile(r"tensor '(?P<name>.+?)' (?P<what>size|stride) mismatch at index "
                     r"(?P<index>\d+)\. expected (?P<expected>\S+), actual (?P<actual>\S+)")
_TENSOR_OTHER = re.compile(r"tensor '(?P<name>.+?)' (?P<what>dtype|device|requires_grad|"
                           r"dispatch key set|rank|ndim)[^.]*mismatch")
# an argument that was a tensor and is not now (``mask=None`` after a mask)
_NOT_TENSOR = re.compile(r"expected type of '(?P<name>.+?)' to be a tensor type, '? but found "
                         r"<class '(?P<found>[\w.]+)'>")
# a tensor the user passes by itself (``x``, ``kwargs['input_ids']``), and one inside a cache
USER_INPUT = re.compile(r"^(?:[A-Za-z_]\w*|kwargs\['[^'\]]+'\])$")
CACHE_TENSOR = re.compile(r"past_key_values|key_cache|value_cache|kv_cache|\bcache\b|layers\[", re.I)
_NAME_HEAD = re.compile(r"^(?P<head>[A-Za-z_]\w*)(?P<rest>.*)$", re.S)
# a size or stride by its source: ``L['x'].size()[0]`` (older logs), ``kwargs['input_ids']
# .size()[1]`` (torch 2.13 names the local)
_SIZE_SOURCE = re.compile(r"(?P<name>(?:L\['[^'\]]+'\]|\b[A-Za-z_]\w*)(?:\.\w+|\[[^\]\n]*\])*?)"
                          r"\.(?P<what>size|stride)\(\)\[(?P<index>\d+)\]")
# the number of keyword arguments a compile was made for: ``len(kwargs) == 6``
_KWARGS_COUNT = re.compile(r"len\((?:L\['kwargs'\]|kwargs)\) == (?P<n>\d+)")
# the range a dynamic compile holds for a size: ``2 <= kwargs['input_ids'].size()[1] <= 64``
_RANGE = re.compile(r"(?:(?P<lo>-?\d+) <= )?(?P<src>.+?\.(?:size|stride)\(\)\[\d+\])"
                    r"(?: <= (?P<hi>-?\d+))?")
# a failed guard's own words end where Dynamo's comment (``  # h = h * scale  # x.py:13 in f``)
# and the user stack it appends (``User stack trace:`` then ``File "…", line N, in fn`` and the
# line's code) begin
_COMMENT = "  #"
_MAX_PARSED = 4000  # characters of a guard parsed to find its comment
_STACK_HEAD = re.compile(r"\n\s*(?:-\s*)?User stack trace:")
_STACK_FRAME = re.compile(r'File "(?P<file>[^"\n]+)", line (?P<line>\d+), in (?P<fn>[^\n]+)\n'
                          r"(?:\s*-)?\s*(?P<code>[^\n]*)")
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


def reasons_of(detail: dict[str, Any]) -> list[str]:
    """A compile's recompile reasons as a flat list of strings (a log may store the list of a
    frame's failed compiles as one JSON text)."""
    out: list[str] = []
    for r in detail.get("recompile_reasons") or []:
        if isinstance(r, str) and r.lstrip().startswith("["):
            try:
                r = safefile.loads(r)
            except ValueError:
                pass
        out.extend(str(x) for x in (r if isinstance(r, list) else [r]))
    return out


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


def _local(name: str) -> str:
    """Dynamo's source of a frame-local input named as its guard failure names it: ``x`` ->
    ``L['x']``, ``kwargs['input_ids']`` -> ``L['kwargs']['input_ids']``; a name that is a
    source already (``L['x']``, as older logs write it) is kept."""
    if re.match(r"^[LG]\['", name):
        return name
    m = _NAME_HEAD.match(name)
    return f"L['{m['head']}']{m['rest']}" if m else f"L['{name}']"


def _comment_at(guard: str) -> int:
    """Where Dynamo's comment begins in a guard's text (-1: none). Dynamo writes the guard's
    code (a Python expression) then ``  # `` and the user's line; a string constant of the
    guard may hold ``  #`` itself (``L['sep'] == '  # '``): the comment begins at the first
    ``  #`` whose text before it parses as an expression (parsed, never evaluated); where none
    does (a tensor guard's message, not code), at the first."""
    first = guard.find(_COMMENT)
    at = first
    while 0 <= at <= _MAX_PARSED:
        try:
            ast.parse(guard[:at].strip(), mode="eval")
            return at
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            at = guard.find(_COMMENT, at + 1)
    return first


def below_range_from_two(guard: str | None) -> bool:
    """Whether the failed guard ``guard`` (``guard_of``'s) is the whole range a dynamic compile
    holds a size in from 2 (``2 <= x.size()[1]``, ``2 <= … <= 64``): sizes 0 and 1, left out
    of it, are what ``backed_size_oblivious`` changes; no other size guard (``3 < s``,
    ``s % 8 == 0``) is."""
    m = _RANGE.fullmatch(guard or "")
    return bool(m and m["lo"] == "2" and _SIZE_SOURCE.fullmatch(m["src"]))


def guard_of(text: str) -> tuple[str, dict[str, Any] | None]:
    """A failed guard as Dynamo reports it, split into the guard itself (``scale == 2.0``) and
    the user line it names (``{file, line, fn, code}``: the innermost frame of the stack it
    appends; None when it appends none)."""
    head = _STACK_HEAD.search(text)
    guard = text[:head.start()] if head else text
    cut = _comment_at(guard)
    guard = (guard[:cut] if cut >= 0 else guard).strip()
    frames = list(_STACK_FRAME.finditer(text[head.end():])) if head else []
    if not frames:
        return guard, None
    f = frames[-1]
    return guard, {"file": f["file"], "line": int(f["line"]), "fn": f["fn"].strip(),
                   "code": f["code"].strip()}


def suggestion(text: str, config: dict[str, Any], symbolic_sources: set[str] | None = None,
               resumed: bool = False, seen: dict[str, str] | None = None,
               specialized: dict[str, Specialized] | None = None,
               wider: list[tuple[str, str]] | None = None, frame: Frame | None = None,
               called: Any = None, static_cache: bool = False,
               also: list[str] | None = None) -> tuple[str, str | None, Any, Any]:
    """What would avoid a recompile whose failed guard says ``text``: (suggestion, the input
    source it is about, the value it expected, the value that failed it). ``symbolic_sources``:
    the sources this compile holds as symbols, those it specialized again left out (None: not
    known) — it "makes a dimension dynamic" only when it has a symbol for it. ``resumed``: the
    compile is of the code Dynamo resumes after a graph break, whose inputs the user does not
    pass. ``seen``: the sizes the other failed guards of the call name ({source: size}), where
    a guard on a range does not say the size that left it. ``specialized``: the sources this
    compile specialized (``recompile_constants.specialized_sources``). ``wider``: the other
    compiles whose guard on the same size failed too, with the size they held (not 0 or 1).
    ``frame``, ``called``: the compiled frame (file, function) and the user's line whose call
    recompiled — a library frame's input the user's call does not name is not theirs to mark
    (``held.held_by_user``), and one it passes by keyword is "the tensor t you pass as x=".
    ``static_cache``: the compile held transformers' static KV cache (``static_kv``): a change
    of its length is a cache of another ``max_cache_len``, never "use a static KV cache".
    ``also``: the values the call changed too that a mark on the user's inputs cannot cover
    (``changed_with.unmarked_changes``): marking the input is then not offered."""
    m = _TENSOR.search(text)
    if m:
        name, index = m["name"], m["index"]
        # how advice names it: a wrapper's positional with the wrapped function's parameter
        shown = frame.said(name) if frame is not None else name
        source = f"{_local(name)}.{m['what']}()[{index}]"
        symbolic = None if symbolic_sources is None else source in symbolic_sources
        held = held_by_user(frame, called, name) if is_passed(name) and not resumed else Held.NO
        cache = CACHE_TENSOR.search(name) is not None
        # a cache's length changed: a growing cache is what a static one avoids; a static
        # cache's length changes only as a cache of another max_cache_len
        cache_fix = ("" if not cache else
                     f"; {static_kv.length_changed(name, m['expected'], m['actual'])}"
                     if static_cache else "; a static KV cache, whose length stays fixed, avoids it")
        # what the call changed besides: a mark on this input does not cover it
        beside = (f"; the same call changed {said(also)} too (new symbols of this compile), "
                  f"which marking {shown!r} does not cover: a mark does not avoid this compile"
                  if also else "")
        top = held is Held.YES
        mark = top and not also  # a mark on it may avoid this compile
        # said of an input not known to be the user's: not theirs, or not known
        theirs = (f"{shown!r} is not an input you pass yourself" if held is Held.NO else
                  f"whether you pass {shown!r} yourself is not recorded: it is an input of a "
                  f"library's {frame.name if frame else 'frame'}, which your line may not "
                  "call itself")
        # what the user calls it: its name, or ``t`` for the tensor passed positionally
        arg, on = as_passed(frame, called, name)
        if m["what"] == "stride":
            return ((f"the memory layout of {shown!r} changed (a transposed or sliced input): "
                     f"pass {arg}.contiguous(){on}, or keep one layout across calls") if top else
                    (f"the strides of {shown!r} changed (they follow a dimension that changed "
                     f"size; {theirs}): torch.compile(dynamic=True) "
                     f"makes sizes and strides symbolic" + ("; a static KV cache keeps them fixed"
                                                           if cache and not static_cache
                                                           else "")),
                    source, m["expected"], m["actual"])
        if m["actual"] in ("0", "1"):
            advice = (f"dimension {index} of {shown!r} is {m['actual']} now (it was "
                      f"{m['expected']}): sizes 0 and 1 are always specialized, so this is a "
                      f"compile of its own (a one-token decode step after a longer prefill), "
                      f"and marking the dimension dynamic does not change that"
                      + (f", nor does backed_size_oblivious: the compile before held "
                         f"{m['expected']} as a fixed size" if m["expected"] not in ("0", "1")
                         else ""))
        elif (specialized or {}).get(source) is not None:
            # a symbol the code needs the value of (``range(x.shape[0])``): Dynamo fixes it,
            # whatever is marked dynamic or an earlier compile held, so it is checked before
            # the sizes 0 and 1 (checked: 2, 3, 4, 5 compile 4 times with dynamic=True and
            # with maybe_mark_dynamic)
            advice = (f"dimension {index} of {shown!r} changed size: this compile made it "
                      f"dynamic, then specialized it to "
                      f"{(specialized or {})[source].said()}: the code there needs the size "
                      f"(a loop over it, say), so each size compiles once, and marking it "
                      f"dynamic or torch.compile(dynamic=True) does not change that"
                      + cache_fix)
        elif m["expected"] in ("0", "1") and wider:
            # the compile before held 0 or 1, but an earlier one held another size: had that
            # one held it as a symbol (dynamic=True, the dimension marked), it could serve this
            other = ", ".join(f"{e} in {c}" for c, e in wider)
            advice = (f"dimension {index} of {shown!r} was {m['expected']} in the compile before "
                      f"and {other}: torch.compile(dynamic=True)"
                      + (f" or torch._dynamo.maybe_mark_dynamic({arg}, {index}){on} before the "
                         "first call" if mark else "")
                      + f" would have compiled {wider[-1][0]} with a symbol for it, which may "
                      f"serve {m['actual']} as well (1 stays a compile of its own)"
                      + ("; this compile makes it dynamic (automatic dynamic), so later sizes "
                         "reuse it" if symbolic else "") + beside
                      + "; `tuidebug advise TRACE --try` measures it")
        elif m["expected"] in ("0", "1"):
            # the compile before held the size 0 or 1, which is always specialized: the first
            # other size compiles again whatever is marked dynamic (dynamic=True included)
            advice = (f"dimension {index} of {shown!r} was {m['expected']} in the compile before "
                      f"(sizes 0 and 1 are always specialized), so its first other size "
                      f"({m['actual']}) compiles again even with torch.compile(dynamic=True) or "
                      f"the dimension marked dynamic"
                      + ("; automatic dynamic shapes are off here (torch.compile(dynamic=False) "
                         "or torch._dynamo.config.automatic_dynamic_shapes=False), so every "
                         "later new size compiles again too"
                         if config.get("automatic_dynamic_shapes") is False else
                         "; this compile makes it dynamic (automatic dynamic), so later sizes "
                         "reuse it" if symbolic else
                         "; this compile did not make it dynamic (it has no symbol for it)"
                         if symbolic is False else "")
                      + cache_fix + "; `tuidebug advise TRACE --try` tries what may")
        elif config.get("automatic_dynamic_shapes") is False:
            advice = (f"automatic dynamic shapes are off here (torch.compile(dynamic=False) or "
                      f"torch._dynamo.config.automatic_dynamic_shapes=False): every new size of "
                      f"dimension {index} of {shown!r} compiles again; drop dynamic=False"
                      + (f", or call torch._dynamo.mark_dynamic({arg}, {index}){on} before "
                         f"the first call" if mark else ""))
        else:
            once = (f"to compile once, call torch._dynamo.maybe_mark_dynamic({arg}, {index})"
                    f"{on} (or mark_dynamic) before the first call, or use "
                    f"torch.compile(dynamic=True)" if mark else
                    static_kv.length_changed(name, m["expected"], m["actual"])
                    if cache and static_cache else
                    f"to compile once, use torch.compile(dynamic=True){beside}" if top else
                    f"to stop it recompiling as it grows, use a static KV cache, whose length "
                    f"stays fixed, or torch.compile(dynamic=True) ({theirs}); "
                    f"`tuidebug advise TRACE --try` measures each"
                    if cache else
                    f"to compile once, use torch.compile(dynamic=True){beside}" if also else
                    f"to compile once, use torch.compile(dynamic=True) ({carried(name)})"
                    if resumed else
                    f"to compile once, use torch.compile(dynamic=True) ({theirs})")
            grows = (m["expected"].isdigit() and m["actual"].isdigit()
                     and int(m["actual"]) == int(m["expected"]) + 1)
            advice = (f"dimension {index} of {shown!r} changed size"
                      + (" (it grows by one each call: a cache)" if grows and
                         CACHE_TENSOR.search(name) else "") + ": "
                      + ("this compile makes it dynamic (automatic dynamic), so later sizes "
                         "reuse it" if symbolic is not False else
                         "this compile did not make it dynamic (it has no symbol for it)")
                      + f"; {once}")
        return advice, source, m["expected"], m["actual"]
    m = _NOT_TENSOR.search(text)
    if m:
        return (f"{m['name']!r} was a tensor in the compile before and is {m['found']} now: a "
                f"tensor and a {m['found']} are compiled separately, so an argument passed as "
                f"a tensor only sometimes (an optional mask) costs a compile for each; passing "
                f"the same kind every call avoids it", _local(m["name"]), None, m["found"])
    m = _TENSOR_OTHER.search(text)
    if m:
        return (f"the {m['what']} of {m['name']!r} changed: each {m['what']} is compiled "
                f"separately; keep it the same across calls", _local(m["name"]), None, None)
    m = CONSTANT.fullmatch(guard_of(text)[0])
    if m:
        return constant_advice(m, symbolic_sources, specialized or {}, resumed, config)
    m = _RANGE.fullmatch(guard_of(text)[0])
    s = _SIZE_SOURCE.fullmatch(m["src"]) if m and (m["lo"] or m["hi"]) else None
    if m and s:
        return _out_of_range(m, s, text, seen or {})
    m = _SIZE_SOURCE.search(text)
    if m:
        source = f"{_local(m['name'])}.{m['what']}()[{m['index']}]"
        return (f"a guard on the size {m.group(0)} failed: code branched on that size (or "
                f"checked it) and the compile holds only for the sizes seen; avoid Python "
                f"branches on sizes (use torch._check for facts), or mark it dynamic with "
                f"torch._dynamo.mark_dynamic", source, None, None)
    m = _KWARGS_COUNT.fullmatch(guard_of(text)[0])
    if m:
        return (f"this call passes another number of keyword arguments than the compile before "
                f"was made for ({m['n']}): each set of keywords is compiled once, whatever is "
                f"dynamic (a caller such as generate() passes other keywords for the prompt "
                f"than for each new token); pass the same keywords every call to avoid it",
                None, m["n"], None)
    if "___check_obj_id" in text or "ID_MATCH" in text or "___check_type_id" in text:
        return ("an object passed in is not the one compiled for (a new module instance, "
                "function or type): reuse one object across calls", None, None, None)
    if "global state" in text.lower() or "GLOBAL_STATE" in text or "grad_mode" in text:
        return ("the global state changed (grad mode, autocast, default dtype): call under "
                "the same torch.no_grad()/autocast state each time", None, None, None)
    return ("read the failed guard; TORCH_LOGS=recompiles_verbose lists every guard that "
            "failed", None, None, None)


def is_passed(name: str) -> bool:
    """Whether ``name`` is an input a call passes itself (``x``, ``kwargs['input_ids']``,
    ``args[0]``), one the user may mark dynamic: asked by ``suggestion`` before it says
    ``maybe_mark_dynamic`` and by ``advice`` before it offers it (one answer for both)."""
    return bool(USER_INPUT.match(name) or POSITIONAL.match(name))


def _out_of_range(m: re.Match[str], s: re.Match[str], text: str, seen: dict[str, str]
                  ) -> tuple[str, str | None, Any, Any]:
    """A size that left the range a dynamic compile holds (``2 <= … <= 64``)."""
    source = f"{_local(s['name'])}.{s['what']}()[{s['index']}]"
    lo, hi = m["lo"], m["hi"]
    value = seen.get(source)
    head = (f"dimension {s['index']} of {s['name']!r} is dynamic in the compile before, which "
            f"covers only {m.group(0)}")
    if value is not None and lo == "2" and value in ("0", "1"):
        why = (f"; {value} is below it: sizes 0 and 1 are always specialized, so this is a "
               f"compile of its own, and marking the dimension dynamic does not change that")
        if "mark_unbacked" in text:
            why += ("; Dynamo's hint: torch._dynamo.decorators.mark_unbacked on that "
                    "dimension before the first call avoids the specialization")
        return head + why, source, f"{lo}…{hi}" if hi else f">= {lo}", value
    if value is not None and hi and value.isdigit() and int(value) > int(hi):
        return (head + f"; {value} is above it: code checked the size against {hi} (a "
                f"model's largest length, say), and a size past it compiles again", source,
                f"{lo}…{hi}" if lo else f"<= {hi}", value)
    return (head + "; the size of this call is outside it, so it compiles again",
            source, None, value)


def explain(cid: str, compiles: dict[str, dict[str, Any]],
            shapes: dict[str, Any] | None = None, held: dict[str, Any] | None = None,
            also: list[str] | None = None) -> dict[str, Any] | None:
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
    ``explain_compile`` passes both, and ``also`` (``suggestion``'s)."""
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
        m = _PREFIX.match(r)
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
    seen = {f"{_local(t['name'])}.{t['what']}()[{t['index']}]": t["actual"]
            for t in (_TENSOR.search(x) for _, x in parsed) if t}
    wider = _wider(parsed, (of, text))
    # the compile a mark would let serve this call (``advice`` asks the same): the earlier one
    # that held another size where the one before held 0 or 1, else the one before
    t = _TENSOR.search(text)
    serving = wider[-1][0] if t and t["expected"] in ("0", "1") and wider else prev
    # the compiled frame, or the function it wraps (a model's forward under transformers'
    # decorators), as the capture recorded it
    frame = wrapped(frame_in(metrics, finished.get("metrics")), recorded.get("wraps"))
    also = (also or []) + held_differently(compiles, serving, cid)
    advice, source, expected, actual = suggestion(
        text, config, symbolic, resumed, seen, specialized_sources(held),
        wider, frame, recorded.get("called_at"),
        static_kv.is_static(detail, (held, shapes))
        or static_kv.is_static(compiles.get(prev or "") or {}, ()), also
    ) if text else ("", None, None, None)
    values = recorded.get("values") if isinstance(recorded.get("values"), dict) else {}
    failing = values.get(source) if source else None
    if failing is None and actual is None and source:
        # a number the compile made a symbol: the value it was traced with is its hint
        failing = next((sym.get("hint") for sym in symbols if sym.get("source") == source
                        and sym.get("hint") is not None), None)
    guard, guard_at = guard_of(text) if text else ("", None)
    if advice and _KWARGS_COUNT.fullmatch(guard):
        # the compile before was made for other keywords (generate()'s prompt, then each new
        # token): the latest guard of another kind that failed (a size of the calls made with
        # these keywords, say) is said too
        same = next(((c, guard_of(t)[0]) for c, t in parsed
                     if c and not _KWARGS_COUNT.fullmatch(guard_of(t)[0])), None)
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
    m = _TENSOR.search(chosen[1])
    if m is None:
        return []
    out = []
    for c, t in parsed:
        o = _TENSOR.search(t)
        if ((c, t) != chosen and c and o and (o["name"], o["what"], o["index"]) ==
                (m["name"], m["what"], m["index"]) and o["expected"] not in ("0", "1")):
            out.append((c, o["expected"]))
    return out[::-1]


def explain_compile(trace: Trace, cid: str) -> dict[str, Any] | None:
    """``explain`` of compile ``cid`` of ``trace``: its own record for what Dynamo was asked, its
    finished attempt's for what the compile did (a recompile whose analysis restarted)."""
    return explain(cid, trace.compiles, trace.compile_shapes_brief(cid),
                   attempts.held_shapes(trace, cid),
                   unmarked_changes(trace, cid, previous_compile(cid, trace.compiles)))
