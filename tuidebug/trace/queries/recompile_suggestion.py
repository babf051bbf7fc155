"""What would avoid a recompile, said from its failed guard (``suggestion``): mark a dimension
dynamic (``maybe_mark_dynamic``, ``mark_dynamic``), ``dynamic=True``, a static KV cache, the
same kind or keywords each call, a config knob — or why none of them would (sizes 0 and 1, a size
the code needs). ``is_passed``: whether an input is one the user's call passes itself."""

from __future__ import annotations

import re
from typing import Any

from tuidebug.trace.queries import static_kv
from tuidebug.trace.queries.changed_with import input_name, said
from tuidebug.trace.queries.failed_guard import (KWARGS_COUNT, NOT_TENSOR, RANGE, SIZE_SOURCE,
                                                 TENSOR, TENSOR_OTHER, guard_of, local_source)
from tuidebug.trace.queries.held import POSITIONAL, Frame, Held, as_passed, held_by_user
from tuidebug.trace.queries.recompile_constants import (CONSTANT, Specialized, carried,
                                                        constant_advice)

# a tensor the user passes by itself (``x``, ``kwargs['input_ids']``), and one inside a cache
USER_INPUT = re.compile(r"^(?:[A-Za-z_]\w*|kwargs\['[^'\]]+'\])$")
CACHE_TENSOR = re.compile(r"past_key_values|key_cache|value_cache|kv_cache|\bcache\b|layers\[", re.I)


def suggestion(text: str, config: dict[str, Any], symbolic_sources: set[str] | None = None,
               resumed: bool = False, seen: dict[str, str] | None = None,
               specialized: dict[str, Specialized] | None = None,
               wider: list[tuple[str, str]] | None = None, frame: Frame | None = None,
               called: Any = None, static_cache: bool = False,
               also: list[str] | None = None, held_other: list[str] | None = None,
               new_dims: list[tuple[str, int]] | None = None
               ) -> tuple[str, str | None, Any, Any]:
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
    (``changed_with.unmarked_changes``): marking the input is then not offered. ``held_other``
    (of ``also``): the constants the compile a dynamic size would let serve the call holds at
    another value (``changed_with.held_differently``: a StaticCache reset between prompts,
    ``is_initialized``): neither a mark nor dynamic=True lets it serve the call. ``new_dims``:
    the dimensions of passed inputs this compile made dynamic and the one before had not
    (``changed_with.new_input_dims``): a mark names each the user passes, as ``advise``'s
    does."""
    m = TENSOR.search(text)
    if m:
        name, index = m["name"], m["index"]
        # how advice names it: a wrapper's positional with the wrapped function's parameter
        shown = frame.said(name) if frame is not None else name
        source = f"{local_source(name)}.{m['what']}()[{index}]"
        symbolic = None if symbolic_sources is None else source in symbolic_sources
        held = held_by_user(frame, called, name) if is_passed(name) and not resumed else Held.NO
        cache = CACHE_TENSOR.search(name) is not None
        # a cache's length changed: a growing cache is what a static one avoids; a static
        # cache's length changes only as a cache of another max_cache_len
        cache_fix = ("" if not cache else
                     f"; {static_kv.length_changed(name, m['expected'], m['actual'])}"
                     if static_cache else "; a static KV cache, whose length stays fixed, avoids it")
        # what the call changed besides: a mark on this input does not cover it; a constant
        # the serving compile holds at another value, no dynamic size does
        constants = [a for a in also or [] if a in (held_other or [])]
        symbols_too = [a for a in also or [] if a not in constants]
        beside = ((f"; the same call changed {said(symbols_too)} too (new symbols of this "
                   f"compile), which marking {shown!r} does not cover: a mark does not avoid "
                   "this compile" if symbols_too else "")
                  + (f"; the compile that could serve this call holds {said(constants)} at "
                     "another value (a constant of that compile, which no dynamic size "
                     "changes): neither a mark nor torch.compile(dynamic=True) avoids this "
                     "compile" if constants else ""))
        top = held is Held.YES
        mark = top and not also  # a mark on it may avoid this compile
        # said of an input not known to be the user's: not theirs, or not known
        theirs = (f"{shown!r} is not an input you pass yourself" if held is Held.NO else
                  f"whether you pass {shown!r} yourself is not recorded: it is an input of a "
                  f"library's {frame.name if frame else 'frame'}, which your line may not "
                  "call itself")
        # what the user calls it: its name, or ``t`` for the tensor passed positionally
        arg, on = as_passed(frame, called, name)
        # the other inputs of the user's this compile made dynamic with it: marked too, or the
        # call compiles again on them (BERT's labels beside input_ids), as advise marks them
        others = [(input_name(s), i) for s, i in new_dims or []
                  if (s, i) != (local_source(name), int(index))
                  and held_by_user(frame, called, input_name(s)) is Held.YES]
        marks = (" and ".join(_mark(frame, called, n, i) for n, i in [(name, index)] + others)
                 + ((" (this compile made it dynamic too)" if len(others) == 1 else
                     " (this compile made them dynamic too)") if others else ""))
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
        elif m["expected"] in ("0", "1") and wider and constants:
            # an earlier compile held another size, but other constants than this call's
            other = ", ".join(f"{e} in {c}" for c, e in wider)
            advice = (f"dimension {index} of {shown!r} was {m['expected']} in the compile before "
                      f"and {other}, but a symbol for it in {wider[-1][0]} would not serve "
                      f"{m['actual']}: {wider[-1][0]} holds {said(constants)} at another value "
                      "than this call (a constant of the compile, which no dynamic size "
                      "changes), so neither torch.compile(dynamic=True) nor marking it dynamic "
                      "avoids this compile"
                      + ("; this compile makes it dynamic (automatic dynamic), so later sizes "
                         "reuse it" if symbolic else ""))
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
                      # advise tries a static cache for a cache (a size-oblivious compile
                      # where the compile before made the size dynamic is listed by info's
                      # advice itself): no pointer to an advise that has nothing to try
                      + cache_fix + ("; `tuidebug advise TRACE --try` tries what may"
                                     if cache else ""))
        elif config.get("automatic_dynamic_shapes") is False:
            advice = (f"automatic dynamic shapes are off here (torch.compile(dynamic=False) or "
                      f"torch._dynamo.config.automatic_dynamic_shapes=False): every new size of "
                      f"dimension {index} of {shown!r} compiles again; drop dynamic=False"
                      + (f", or call torch._dynamo.mark_dynamic({arg}, {index}){on} before "
                         f"the first call" if mark else ""))
        else:
            once = (f"to compile once, call {marks} (or mark_dynamic) before the first call, "
                    f"or use torch.compile(dynamic=True)" if mark else
                    static_kv.length_changed(name, m["expected"], m["actual"])
                    if cache and static_cache else
                    f"no dynamic size avoids it{beside}" if constants else
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
    m = NOT_TENSOR.search(text)
    if m:
        return (f"{m['name']!r} was a tensor in the compile before and is {m['found']} now: a "
                f"tensor and a {m['found']} are compiled separately, so an argument passed as "
                f"a tensor only sometimes (an optional mask) costs a compile for each; passing "
                f"the same kind every call avoids it", local_source(m["name"]), None, m["found"])
    m = TENSOR_OTHER.search(text)
    if m:
        return (f"the {m['what']} of {m['name']!r} changed: each {m['what']} is compiled "
                f"separately; keep it the same across calls", local_source(m["name"]), None, None)
    m = CONSTANT.fullmatch(guard_of(text)[0])
    if m:
        return constant_advice(m, symbolic_sources, specialized or {}, resumed, config)
    m = RANGE.fullmatch(guard_of(text)[0])
    s = SIZE_SOURCE.fullmatch(m["src"]) if m and (m["lo"] or m["hi"]) else None
    if m and s:
        return _out_of_range(m, s, text, seen or {})
    m = SIZE_SOURCE.search(text)
    if m:
        source = f"{local_source(m['name'])}.{m['what']}()[{m['index']}]"
        return (f"a guard on the size {m.group(0)} failed: code branched on that size (or "
                f"checked it) and the compile holds only for the sizes seen; avoid Python "
                f"branches on sizes (use torch._check for facts), or mark it dynamic with "
                f"torch._dynamo.mark_dynamic", source, None, None)
    m = KWARGS_COUNT.fullmatch(guard_of(text)[0])
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


def _mark(frame: Frame | None, called: Any, name: str, index: int | str) -> str:
    """The call that marks dimension ``index`` of input ``name`` as the user passes it."""
    arg, on = as_passed(frame, called, name)
    return f"torch._dynamo.maybe_mark_dynamic({arg}, {index}){on}"


def is_passed(name: str) -> bool:
    """Whether ``name`` is an input a call passes itself (``x``, ``kwargs['input_ids']``,
    ``args[0]``), one the user may mark dynamic: asked by ``suggestion`` before it says
    ``maybe_mark_dynamic`` and by ``advice`` before it offers it (one answer for both)."""
    return bool(USER_INPUT.match(name) or POSITIONAL.match(name))


def _out_of_range(m: re.Match[str], s: re.Match[str], text: str, seen: dict[str, str]
                  ) -> tuple[str, str | None, Any, Any]:
    """A size that left the range a dynamic compile holds (``2 <= … <= 64``)."""
    source = f"{local_source(s['name'])}.{s['what']}()[{s['index']}]"
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
