"""The text of every ``repro.py`` that ``minify`` writes (``codegen.render`` fills its
``@@…@@`` slots): seeded inputs, the Inductor config, the compiled forward, the accuracy judge
copied in, and the run that reports how it failed. It is the repro's own code (it imports torch
and Inductor's config); tuidebug never runs it in its own process.
"""

TEMPLATE = r'''#!/usr/bin/env python3
@@HEADER@@# Run: python repro.py   exit status 1: it failed as expected; 3: it failed differently
#                        (another kind, exception type or message); 0: no failure;
#                        2: the graph does not even run eagerly.
import json
import operator
import os
import re
import sys
import traceback

import torch
import torch._inductor.config

# The Inductor config values the failure needs, applied while torch.compile compiles.
CONFIG = {
@@CONFIG@@
}
# The failure: its kind (compile | runtime | accuracy), exception type and distinctive message
# (the compiler's normalized "error:" lines, else the normalized first line; see _same).
EXPECTED = @@EXPECTED@@
TOL = @@TOL@@  # accuracy: the judge's tolerance (None: by dtype); see _compare
SEED = 0


@@FORWARD@@

# (shape, stride, dtype, device, fill) of each input of forward(); fill: seeded random values,
# or all zeros / all ones.
INPUTS = [
@@INPUTS@@
]


def make_inputs():
    gen = torch.Generator().manual_seed(SEED)
    out = []
    for shape, stride, dtype, device, fill in INPUTS:
        size = 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 0
        if dtype.is_complex:
            base = torch.randn(size, generator=gen, dtype=dtype)
        elif dtype.is_floating_point:
            base = torch.randn(size, generator=gen).to(dtype)
        elif dtype == torch.bool:
            base = torch.rand(size, generator=gen) < 0.5
        else:
            base = torch.randint(0, 2, (size,), generator=gen).to(dtype)
        if fill != "random":  # drawn all the same: the other inputs keep their values
            base = torch.zeros_like(base) if fill == "zeros" else torch.ones_like(base)
        out.append(base.to(device).as_strided(shape, stride))
    return out


# ---- the accuracy judge of tuidebug (tuidebug/compiler/judge.py), as the trace used it ----
@@JUDGE@@
# ---- end of the judge ----


def _compare(actual, expected, reference, why_no_fp64, why_each=None):
    """(mismatch, the judge's verdict) of compiled outputs against eager and float64."""
    verdict = judge(actual, expected, reference, TOL, why_no_fp64, why_each)
    return not verdict["close"], verdict


def _kind(exc):
    """compile: raised while Dynamo/Inductor compiled; runtime: raised by the compiled code."""
    e = exc
    while e is not None:
        if type(e).__name__ in ("InductorError", "BackendCompilerFailed") or \
                type(e).__module__.startswith("torch._dynamo.exc"):
            return "compile"
        e = getattr(e, "inner_exception", None)
    return "runtime"


def _failure(exc):
    inner = exc
    while getattr(inner, "inner_exception", None) is not None:
        inner = inner.inner_exception
    return {"outcome": "failed", "kind": _kind(exc),
            "type": f"{type(inner).__module__}.{type(inner).__qualname__}",
            "message": str(inner)[:20000],
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:]}


def float64_reference():
    """(forward() on its inputs in float64, casts to narrower floats kept in float64, as the
    trace's check ran it; else None and why: no float64 reference for a graph that drew random
    numbers, as in the trace; an op without float64 support: the judge's fallback rules;
    per output, why its value is no float64 reference: computed from one computed in a narrower
    float, as in the trace)."""
    try:
        torch.manual_seed(SEED)
        wide = [upcast(x) for x in make_inputs()]
        mode = KeptWide()
        with mode:
            reference = forward(*wide)
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"[:200], None
    if mode.drew:
        return None, RANDOM_WHY, None
    return reference, "", mode.narrow_notes(reference)


def run():
    """Compile forward() with torch.compile (Inductor) and run it once; say what happened."""
    with torch.no_grad():
        try:
            torch.manual_seed(SEED)
            expected = forward(*make_inputs())
        except Exception as e:
            return {"outcome": "invalid", "reason": f"eager run failed: {type(e).__name__}: {e}"[:2000]}
        compiled = torch.compile(forward, fullgraph=True)
        try:
            with torch._inductor.config.patch(CONFIG):
                torch.manual_seed(SEED)
                actual = compiled(*make_inputs())
        except Exception as e:
            return _failure(e)
        if EXPECTED["kind"] != "accuracy":
            return {"outcome": "passed"}
        reference, why, notes = float64_reference()
        bad, verdict = _compare(actual, expected, reference, why, notes)
        if bad:
            return {"outcome": "failed", "kind": "accuracy", "type": "AccuracyMismatch",
                    "max_abs": verdict["max_abs"], "rule": verdict["rule"],
                    "message": f"compiled output differs from eager: {verdict['detail']} "
                               f"(rule {verdict['rule']})"}
        return {"outcome": "passed", "max_abs": verdict["max_abs"], "rule": verdict["rule"]}


# What varies between runs of the same failure (paths, temp names, addresses, numbers) is
# stripped before messages are compared: the same normalization as tuidebug's signatures.
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "`": "'"})
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\w.~+-]*/)+[\w.+-]+")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_TMP = re.compile(r"\btmp[\w]*")
_NUM = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_DIAG = re.compile(r"(?:^|[\s:])(?:fatal )?error:\s*(?P<msg>.+?)\s*$", re.IGNORECASE)


def _normalize(text):
    t = text.translate(_QUOTES)
    t = _NUM.sub("N", _TMP.sub("<tmp>", _HEX.sub("<hex>", _PATH.sub("<path>", t))))
    return re.sub(r"\s+", " ", t).strip()[:300]


def _error_lines(text):
    """The compiler's "error:" lines (not warnings or notes), as printed."""
    return [line.strip() for line in text.splitlines() if _DIAG.search(line)
            and "warning:" not in line.lower() and "note:" not in line.lower()]


def _diagnostics(text):
    return {m for m in (_normalize(_DIAG.search(line).group("msg")) for line in _error_lines(text))
            if m}


def _first_line(text):
    return next((n for n in map(_normalize, text.splitlines()) if n), "")


def _short(type_name):
    return type_name[len("builtins."):] if type_name.startswith("builtins.") else type_name


def _same(result):
    """Is this EXPECTED's failure: the same kind, exception type and distinctive message?"""
    if result["kind"] != EXPECTED["kind"] or _short(result["type"]) != EXPECTED["type"]:
        return False
    if EXPECTED["kind"] == "accuracy":
        return True
    message, tb = result.get("message") or "", result.get("traceback") or ""
    if EXPECTED["diags"]:
        return bool((_diagnostics(message) or _diagnostics(tb)) & set(EXPECTED["diags"]))
    return _first_line(message) == EXPECTED["key"]


def main():
    result = run()
    if os.environ.get("TUIDEBUG_REPRO_RESULT"):
        with open(os.environ["TUIDEBUG_REPRO_RESULT"], "w") as f:
            json.dump(result, f)
    if result["outcome"] == "invalid":
        print(f"repro: {result['reason']}", file=sys.stderr)
        return 2
    if result["outcome"] == "passed":
        print("repro: compiled and ran without the failure", file=sys.stderr)
        return 0
    message = result.get("message") or ""
    errors = _error_lines(message) or _error_lines(result.get("traceback") or "")
    first = message.strip().splitlines()[:1]
    print(f"repro: {result['type']}: {first[0] if first else ''}", file=sys.stderr)
    for line in errors[:10]:
        print(f"repro:   {line}", file=sys.stderr)
    if result.get("traceback"):
        print(result["traceback"], file=sys.stderr)
    detail = f"error: {_DIAG.search(errors[0]).group('msg')}" if errors else \
        (first[0] if first else "")
    if _same(result):
        print(f"repro: FAILED as expected ({result['kind']}): {_short(result['type'])}: {detail}",
              file=sys.stderr)
        return 1
    wanted = f"error: {EXPECTED['diags'][0]}" if EXPECTED["diags"] else EXPECTED["key"]
    print(f"repro: failed DIFFERENTLY ({result['kind']}): {_short(result['type'])}: {detail}\n"
          f"repro:   expected {EXPECTED['kind']}: {EXPECTED['type']}"
          f"{': ' + wanted if wanted else ''}", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
'''
