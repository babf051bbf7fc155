"""What the user can do about a trace's graph breaks and recompiles, derived from the trace and
claiming only what it shows: a suggestion names something the user can act on (an input they
pass, a config knob, ``dynamic=True``, a static KV cache, a code change for a break) and, where
it can be applied without editing the user's files (a config knob, an argument of the compile
call, marking an input dynamic by its source), how to try it (``Apply``). ``advice.json``
(``tuidebug advise --try``) keeps what trying each one measured; ``verdicts`` reads it back.
Plain text matching on the trace: nothing from it is evaluated."""

from __future__ import annotations

import re
from typing import Any

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.advice_records import (  # noqa: F401 (their names, here too)
    Apply, Counts, Suggestion, Tried)
from tuidebug.trace.queries.attempts import final_attempt, first_attempt, held_shapes
from tuidebug.trace.queries.break_advice import break_advice
from tuidebug.trace.queries.break_diff import break_ident
from tuidebug.trace.queries.cache_advice import (  # noqa: F401
    STATIC_CACHE_LEN, cache_advice, grows_by_one, one_length, siblings)
from tuidebug.trace.queries.changed_with import (
    dim_source, held_differently, made_dynamic_with, said as said_changes, unmarked_changes)
from tuidebug.trace.queries.held import Held, as_passed, frame_of, held_by_user
from tuidebug.trace.queries.graph_breaks import trace_breaks
from tuidebug.trace.queries.marked_dynamic import input_name, marked_advice
from tuidebug.trace.queries.mask_pins import pinned_to_one
from tuidebug.trace.queries.recompile_constants import specialized_sources, symbolic_sources
from tuidebug.trace.queries.failed_guard import below_range_from_two
from tuidebug.trace.queries.recompile_suggestion import CACHE_TENSOR, is_passed
from tuidebug.trace.queries.recompiles import compile_config, explain_compile
from tuidebug.trace.queries.static_kv import is_static


def counts(trace: Trace, wall_s: float | None = None) -> Counts:
    """The counts of a trace (a run of the script under capture)."""
    # a compile made a graph that ran; a restarted analysis's graph is redone by its restart
    made = list(dict.fromkeys(g.compile_id for g in trace.graphs if g.status != "restarted"))
    # a recompile whose analysis restarted (at a graph break) made its graph under the
    # restart's id (``0/1_1``): its reasons are the first attempt's (``0/1``)
    recompiled = [cid for cid in made
                  if any(explain_compile(trace, c)
                         for c in dict.fromkeys([cid, first_attempt(cid)]))]
    met = [b for bs in trace_breaks(trace).values() for b in bs]
    script = trace.manifest.script_error
    status = trace.status if not script else "raised"
    return Counts(compiles=len(made), recompiles=len(recompiled), graph_breaks=len(met),
                  wall_s=wall_s, status=status, break_lines=len({break_ident(b) for b in met}))


def rank(tried: list[Tried]) -> list[Tried]:
    """The ones that helped first, fewest compiles and breaks first; then the rest."""
    return sorted(tried, key=lambda t: (not t.helped, t.after.compiles, t.after.graph_breaks,
                                        t.after.wall_s if t.after.wall_s is not None else 1e18))


def verdicts(trace: Trace) -> dict[str, Tried]:
    """What ``advise --try`` measured for this trace (``advice.json``), by suggestion id."""
    out = {}
    for t in trace.advice.get("tried") or []:
        if isinstance(t, dict) and t.get("id"):
            out[str(t["id"])] = Tried(id=str(t["id"]), before=Counts.from_json(t.get("before")),
                                      after=Counts.from_json(t.get("after")),
                                      trace=str(t["trace"]) if t.get("trace") else None)
    return out


_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|inf|nan)")


def _number_source(source: str | None) -> str | None:
    """``L['scale']`` -> ``scale``: a number of the frame (not a tensor's size)."""
    m = re.fullmatch(r"L\['(?P<name>[A-Za-z_]\w*)'\]", source or "")
    return m["name"] if m else None


def _has_symbol(trace: Trace, cid: str, source: str) -> bool:
    """Whether compile ``cid`` holds ``source`` as a symbol (one it specialized again, as a
    loop over ``range(n)`` does, is a constant), as its finished attempt recorded it."""
    return source in (symbolic_sources(held_shapes(trace, cid)) or set())


def _oblivious_why(trace: Trace, cid: str, rec: dict[str, Any], name: str, index: int
                   ) -> str | None:
    """Why ``backed_size_oblivious`` (sizes 0 and 1 not specialized) may avoid recompile
    ``cid`` on a size that is 0 or 1 on one side; None where the trace shows it cannot. The flag
    changes only how a size the compile before made dynamic is held: a 0 or 1 left a range
    that compile held as a symbol (``2 <= s``), or that compile made the size dynamic (it
    recompiled on it: automatic dynamic; an earlier compile held another size; dynamic=True)
    and specialized the 0 or 1 it saw. A size it held fixed (``size mismatch … expected 6``,
    as a first compile holds every size) fails its guard whatever the flag (checked on torch
    2.13: a prefill then one-token decode steps, and BART's generate(), compile as often
    with it; 5, 1, then 7 compiles twice with it, three times without). Nor where the call
    changed what the compile before held fixed (``changed_with``: a new symbol of this compile,
    an input it guards at another value — Llama's decode compile was made for a filled
    StaticCache and the next prompt's is fresh: 3 compiles → 3 with the flag). Nor where the
    compile before ran transformers' causal mask, which compares the query length with 1 and
    so pins it with the flag too (``mask_pins``: a tiny GPT-2's decode loop, prompts of 5 and 7
    tokens, 5 compiles → 5 with the flag)."""
    actual, expected, prev = str(rec.get("failing_value")), rec.get("expected"), \
        rec.get("previous")
    if prev and pinned_to_one(trace.compiles.get(final_attempt(trace.compiles, str(prev)))
                              or {}, rec.get("source"), str(prev)):
        # the compile before ran transformers' causal mask, which compares the query length
        # with 1: the flag leaves that compile serving only 1 (``mask_pins``)
        return None
    if held_differently(trace.compiles, prev, cid):
        # the compile before holds another input at another value (compiled for a filled
        # StaticCache, this call's is fresh): it cannot serve this call, whatever the flag
        return None
    if "size mismatch" not in str(rec.get("failed_guard") or ""):
        # only a size left below the range the compile before held it in from 2: another
        # guard on it (``3 < s``, ``s % 8 == 0``) fails whatever the flag
        if actual not in ("0", "1") or not below_range_from_two(rec.get("failed_guard")):
            return None
        return (f"{cid}: dimension {index} of {name} became {actual}, below the range "
                f"({rec.get('failed_guard') if expected is None else expected}) the compile "
                "before held it dynamic in: sizes 0 and 1 are "
                "always specialized, so this is a compile of its own; marking that "
                "dimension dynamic does not change it")
    if str(expected) not in ("0", "1") or not prev or unmarked_changes(trace, cid, prev,
                                                                          rec.get("source")):
        # the call changed another value the compile before held fixed (a static cache's
        # max_cache_len): holding this size as a symbol there does not serve it
        return None
    before = explain_compile(trace, prev) or {}
    made = ("dynamic=True" if compile_config(trace.compiles, prev).get(
        "assume_static_by_default") is False else
        "it recompiled on it" if before.get("source") == rec.get("source") else
        "an earlier compile held another size" if rec.get("wider") else None)
    if made is None:
        return None
    return (f"{cid}: dimension {index} of {name} was {expected} in {prev}, which made it "
            f"dynamic ({made}) but specialized the {expected} (sizes 0 and 1 are always "
            f"specialized), so {actual} compiled again; with the flag {prev} holds it as a "
            f"symbol, which may serve {actual}")


def recompile_advice(trace: Trace) -> list[Suggestion]:
    """Suggestions for the trace's recompiles, each checked against what the compiles show."""
    out: dict[str, Suggestion] = {}
    for cid in trace.compiles:
        rec = explain_compile(trace, cid)
        if not rec:
            continue
        if rec.get("limit_hit"):
            limit = rec.get("limit")
            knob = rec.get("limit_name") or "recompile_limit"
            if isinstance(limit, int):
                out.setdefault(f"raise {knob}", Suggestion(
                    f"raise {knob}", f"raise torch._dynamo.config.{knob} (now {limit})",
                    f"{cid} hit the recompile limit: the function ran eagerly from then on",
                    "recompiles", Apply(config={f"dynamo.{knob}": limit * 4})))
            continue
        dim = dim_source(rec.get("source"))
        number = _number_source(rec.get("source"))
        if dim is None and number is not None and _NUMBER.fullmatch(str(rec.get("expected"))):
            found = _number_advice(trace, cid, rec, number)
            if found is not None:
                out.setdefault(found.id, found)
            continue
        if dim is None:
            continue
        src, index = dim
        name = input_name(src)
        frame = frame_of(trace, cid)
        # a wrapper's positional named with the wrapped forward's parameter: input_ids (args[0])
        shown = frame.said(name) if frame is not None else name
        static = _static_cache(trace, cid, rec.get("previous"))
        actual = str(rec.get("failing_value"))
        expected = str(rec.get("expected"))
        wider = [w for w in rec.get("wider") or [] if isinstance(w, dict)]
        fixed = specialized_sources(held_shapes(trace, cid)).get(str(rec.get("source")))
        oblivious = None if fixed is not None and actual not in ("0", "1") else \
            _oblivious_why(trace, cid, rec, name, index)
        if oblivious:
            out.setdefault("backed_size_oblivious", Suggestion(
                "backed_size_oblivious",
                "try torch.fx.experimental._config.backed_size_oblivious = True (sizes 0 and 1 "
                "then need not be specialized)", oblivious, "recompiles",
                Apply(config={"fx.backed_size_oblivious": True})))
        if expected in ("0", "1") and actual not in ("0", "1") and wider:
            # an earlier compile held another size: dynamic there may serve this one
            expected = f"{wider[-1].get('size')} in {wider[-1].get('compile')}"
        if fixed is not None and actual not in ("0", "1"):
            # the code needs the size (a loop over range(x.shape[0])): each size compiles once,
            # marked dynamic or not, whatever the compile before held (a 1 included: so
            # backed_size_oblivious would not avoid it either); only a cache whose length
            # stays fixed avoids it
            if CACHE_TENSOR.search(name):
                cache = cache_advice(name, index, f"{cid}: dimension {index} of {name} "
                                      f"changed ({expected} → {actual}) and the code "
                                      f"specialized it ({fixed.said()})",
                                      grows_by_one(expected, actual), static)
                out.setdefault(cache.id, cache)
            continue
        if actual in ("0", "1") or expected in ("0", "1"):
            # a size 0 or 1 on either side is specialized: marking it dynamic cannot avoid
            # this compile; a static cache (its length fixed) may, and size-oblivious sizes
            # where the compile before held the size dynamic (``_oblivious_why``)
            if expected in ("0", "1") and CACHE_TENSOR.search(name):
                cache = cache_advice(name, index, f"{cid}: dimension {index} of {name} "
                                      f"changed ({expected} → {actual})",
                                      grows_by_one(expected, actual), static)
                out.setdefault(cache.id, cache)
            continue
        symbolic = _has_symbol(trace, cid, str(rec.get("source")))
        # what the same call changed besides, that no mark on the user's inputs covers
        # the compile a mark would let serve this call: the earlier one that held another
        # size where the one before held 0 or 1, else the one before
        serving = (wider[-1].get("compile") if str(rec.get("expected")) in ("0", "1") and wider
                   else rec.get("previous"))
        symbols_too = unmarked_changes(trace, cid, rec.get("previous"), rec.get("source"))
        constants = held_differently(trace.compiles, serving, cid)
        also = symbols_too + constants
        why = (f"{cid}: dimension {index} of {shown} changed ({expected} → {actual})"
               + ("; this compile made it dynamic (automatic dynamic), a compile more than "
                  "needed" if symbolic else "; this compile did not make it dynamic")
               + (f"; the same call changed {said_changes(symbols_too)} too, which dynamic=True "
                  "holds as symbols as well" if symbols_too else "")
               + (f"; {serving} holds {said_changes(constants)} at another value than this "
                  "call (a constant of the compile, which no dynamic size changes)"
                  if constants else ""))
        if _may_serve(trace, cid, rec):
            out.setdefault("dynamic=True", Suggestion(
                "dynamic=True", "compile with torch.compile(..., dynamic=True)", why,
                "recompiles", Apply(compile_kwargs={"dynamic": True})))
        if also and static and any(a.endswith(".max_cache_len") for a in also):
            # a new StaticCache of another length with each prompt: one length for all
            out.setdefault("one max_cache_len", one_length(why))
        if also:
            pass  # a mark on this input leaves the other change to recompile: dynamic=True
        elif held_by_user(frame, rec.get("called_at"), name) is not Held.YES:
            pass  # a library's own call (a loss given the model's logits), or not known to be
            # the user's (a library's forward their line may not call): dynamic=True above
        elif is_passed(name) and not rec.get("resumed"):
            dims = [(s, i) for s, i in made_dynamic_with(trace, cid, rec.get("previous"),
                                                          src, index)
                    if held_by_user(frame, rec.get("called_at"), input_name(s)) is Held.YES]
            also = [f"dimension {i} of {input_name(s)}" for s, i in dims[1:]]
            said = [as_passed(frame, rec.get("called_at"), input_name(s)) for s, _ in dims]
            calls = "; ".join(f"torch._dynamo.maybe_mark_dynamic({n}, {i}){words}"
                              for (n, words), (_, i) in zip(said, dims))
            out.setdefault(f"mark_dynamic {name} {index}", Suggestion(
                f"mark_dynamic {name} {index}",
                f"mark dimension {index} of {shown}"
                + (f" and {', '.join(also)} (this compile made them dynamic too)" if also
                   else "") + f" dynamic before the first call ({calls})",
                why, "recompiles",
                Apply(dynamic_sources=[f"{s}:{i}" for s, i in dims])))
        else:
            out.setdefault(f"dynamic_sources {name} {index}", Suggestion(
                f"dynamic_sources {name} {index}",
                f"mark dimension {index} of {name}"
                + (" (and its siblings)" if siblings(src, index) != f"{re.escape(src)}:{index}"
                   else "") + " dynamic from the first "
                f"compile: torch.compiler.config.dynamic_sources = {siblings(src, index)!r} "
                "(or the environment variable TORCH_COMPILE_DYNAMIC_SOURCES)", why,
                "recompiles", Apply(dynamic_sources=[siblings(src, index)])))
        if CACHE_TENSOR.search(name):
            grows = grows_by_one(rec.get("expected"), actual)
            cache = cache_advice(name, index, why, grows, static)
            out.setdefault(cache.id, cache)
    return list(out.values())


def _may_serve(trace: Trace, cid: str, rec: dict[str, Any]) -> bool:
    """Whether a compile dynamic=True could let serve recompile ``cid``'s call: one that held
    the size at a value other than 0 or 1 (the one before, or an earlier one whose guard on it
    failed too) and whose guards hold no input at another value than the call (a StaticCache
    reset between prompts: the first prompt's compile was made for a fresh cache,
    ``is_initialized == False``, the next prompt's is filled; the decode step's held the
    length 1. Measured on a tiny Llama: 3 compiles → 3 with dynamic=True). Where guards are
    not recorded, nothing is held against it."""
    held = [str(w.get("compile")) for w in rec.get("wider") or []
            if isinstance(w, dict) and w.get("compile")]
    if rec.get("previous") and str(rec.get("expected")) not in ("0", "1"):
        held.append(str(rec["previous"]))
    return any(not held_differently(trace.compiles, c, cid) for c in held)


def _static_cache(trace: Trace, cid: str, prev: Any) -> bool:
    """Whether compile ``cid`` or the one before held transformers' static KV cache."""
    return any(is_static(trace.compiles.get(str(c)) or {}, (held_shapes(trace, str(c)),))
               for c in (cid, prev) if c)


def _number_advice(trace: Trace, cid: str, rec: dict[str, Any], number: str
                   ) -> Suggestion | None:
    """What avoids recompile ``cid`` on the Python number ``number`` (a local of the frame),
    as the compile's Dynamo config and shapes say. On torch 2.13 four values of ``n`` in
    ``x * n`` compiled 2 times by default, 1 with dynamic=True; 4 with
    automatic_dynamic_shapes=False (1 with dynamic=True); 4 with specialize_int=True
    (specialize_float=True for a float), with dynamic=True too."""
    source = str(rec.get("source"))
    kind = "int" if re.fullmatch(r"-?\d+", str(rec.get("expected"))) else "float"
    knob = f"specialize_{kind}"
    config = compile_config(trace.compiles, cid)
    change = (f"{cid}: the Python {kind} {number} changed ({rec.get('expected')} → "
              f"{rec.get('failing_value')})")
    if _has_symbol(trace, cid, source):
        why = (f"{change}: it was a constant of the compile before; this compile made it a "
               "symbol (automatic dynamic), a compile more than needed")
    elif specialized_sources(held_shapes(trace, cid)).get(source) is not None:
        return None  # the code needs its value: dynamic=True compiles each value all the same
    elif config.get(knob) is True:
        return Suggestion(
            f"{knob}=False", f"set torch._dynamo.config.{knob} = False (the default)",
            f"{change}: torch._dynamo.config.{knob} is True, so every {kind} is a constant of "
            "the compile and each value compiles once; dynamic=True does not change that",
            "recompiles", Apply(config={f"dynamo.{knob}": False}))
    elif config.get("automatic_dynamic_shapes") is False:
        why = (f"{change}: automatic dynamic shapes are off (dynamic=False or "
               "automatic_dynamic_shapes=False), so it stays a constant and each value "
               "compiles again")
    else:
        return None  # not a symbol, and nothing recorded says why: no promise
    return Suggestion("dynamic=True", "compile with torch.compile(..., dynamic=True)", why,
                      "recompiles", Apply(compile_kwargs={"dynamic": True}))


def suggestions(trace: Trace) -> list[Suggestion]:
    """Every suggestion for the trace: a compile Dynamo refused (a size marked dynamic that
    the code specialized) first, then recompiles, then graph breaks."""
    marked = [Suggestion(a.id, a.text, a.why, "compile failure", None)
              for a in marked_advice(trace)]
    return marked + recompile_advice(trace) + break_advice(trace)
