"""Candidate code generation: a :class:`~tuidebug.minify.program.Program` -> ``repro.py`` text.

Every candidate the minifier tests is exactly the ``repro.py`` it would write: a standalone
script that needs only torch, builds seeded random inputs, sets the Inductor config the failure
needs, calls ``torch.compile`` on a function of ATen calls and reports how it failed. Values read
from the trace reach the generated code only through a whitelist (identifiers, numbers, strings
via ``repr``, dtypes, devices), so nothing in a trace can inject code into it.

Names are canonical (``arg0``, ``relu``, ``relu_1`` in order), so two structurally identical
candidates render to the same text: the text without comments is the candidate's cache key.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from tuidebug.minify import oppolicy
from tuidebug.minify.program import GETITEM, Program, Unsupported, is_identifier

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_TORCH_ATTR = re.compile(r"^torch\.[A-Za-z_][A-Za-z0-9_]*$")
_DEVICE = re.compile(r"^(cpu|cuda|xpu|mps|meta|hpu|mtia|privateuseone)(:\d+)?$")
_SPECIAL_FLOATS = {"inf": "float('inf')", "-inf": "float('-inf')", "nan": "float('nan')"}
_RESERVED = {"torch", "operator", "float", "forward", "json", "os", "re", "sys", "traceback"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_FILLS = ("random", "zeros", "ones")


@dataclass(frozen=True)
class ReproInfo:
    """What the header and the failure check of a repro say.

    ``kind``, ``type``, ``key`` and ``diags`` are the failure's signature (see
    ``signature.Signature``): the repro checks a failure against them, normalized the same way.
    """

    trace: str = ""
    graph: str = ""
    stage: str = ""
    describe: str = ""
    kind: str = "compile"
    type: str = ""
    nodes_before: int = 0
    tol: float | None = None  # the accuracy judge's tolerance; None: each dtype's default
    key: str = ""
    diags: tuple[str, ...] = ()

    def expected(self) -> dict[str, Any]:
        """The repro's ``EXPECTED``."""
        return {"kind": self.kind, "type": self.type, "key": self.key,
                "diags": sorted(self.diags)}


def target_call(target: str) -> str:
    """``aten.relu.default`` -> ``torch.ops.aten.relu.default``; raises Unsupported otherwise."""
    parts = target.split(".")
    if not _DOTTED.match(target):
        raise Unsupported(f"target {target!r} is not a dotted name")
    why = oppolicy.refusal(target)  # tensor computations only: the target comes from a trace
    if why and parts[0] not in ("torch", "builtins", "higher_order"):
        raise Unsupported(why)
    if parts[0] == "operator" and len(parts) == 2:
        return target
    if parts[0] in ("torch", "builtins", "higher_order"):
        raise Unsupported(f"target {target} is not an ATen/prims operator")
    if len(parts) in (2, 3):
        return "torch.ops." + target
    raise Unsupported(f"target {target!r} is not an operator overload")


def value_code(value: Any, env: dict[str, str] | None) -> str:
    """Python source for one argument value of the snapshot JSON (``env``: node -> variable)."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else \
            _SPECIAL_FLOATS["nan" if value != value else ("inf" if value > 0 else "-inf")]
    if isinstance(value, list):
        return "[" + ", ".join(value_code(v, env) for v in value) + "]"
    if isinstance(value, dict):
        if "node" in value and len(value) == 1:
            name = str(value["node"])
            if env is None:
                return "x"
            if name not in env:
                raise Unsupported(f"reference to unknown node {name!r}")
            return env[name]
        if "repr" in value and len(value) == 1:
            text = str(value["repr"]).strip()
            if text in _SPECIAL_FLOATS:
                return _SPECIAL_FLOATS[text]
            if _TORCH_ATTR.match(text):
                return text
            if _DEVICE.match(text):
                return f"torch.device({text!r})"
            raise Unsupported(f"argument {text[:60]!r} cannot be written as code")
    raise Unsupported(f"argument of type {type(value).__name__} cannot be written as code")


def check_node(target: str, args: Any, kwargs: Any) -> str | None:
    """Why a node cannot be part of a candidate, or None when it can."""
    try:
        if target != GETITEM:
            target_call(target)
        value_code(args, None)
        for k, v in (kwargs or {}).items():
            if not is_identifier(str(k)):
                raise Unsupported(f"keyword {k!r}")
            value_code(v, None)
    except Unsupported as e:
        return str(e)
    return None


def _comment(text: str) -> str:
    return _CONTROL.sub(" ", text).strip()


def _var_base(target: str) -> str:
    parts = target.split(".")
    base = parts[1] if len(parts) >= 2 else parts[0]
    base = re.sub(r"\W", "_", base).strip("_") or "v"
    if not is_identifier(base) or base in _RESERVED or base.startswith("arg"):
        base = f"{base}_v" if is_identifier(f"{base}_v") else "v"
    return base


def _flag_value(value: Any) -> str:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value_code(value, None)
    if isinstance(value, list):
        return "[" + ", ".join(_flag_value(v) for v in value) + "]"
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return "{" + ", ".join(f"{k!r}: {_flag_value(v)}" for k, v in value.items()) + "}"
    raise Unsupported(f"config value {value!r} cannot be written as code")


def config_flag_ok(name: str, value: Any) -> bool:
    try:
        _flag_value(value)
    except Unsupported:
        return False
    return bool(_DOTTED.match(name))


def forward_code(program: Program, comments: bool) -> tuple[str, list[str]]:
    """``def forward(...)`` and the variable names of its inputs."""
    env: dict[str, str] = {}
    params = []
    for i, inp in enumerate(program.inputs):
        env[inp.name] = f"arg{i}"
        params.append(f"arg{i}")
    counts: dict[str, int] = {}
    used = set(params)
    lines = [f"def forward({', '.join(params)}):"]
    for op in program.ops:
        base = _var_base(op.target)
        n = counts.get(base, 0)
        var = base if n == 0 else f"{base}_{n}"
        while var in used:
            n += 1
            var = f"{base}_{n}"
        counts[base] = n + 1
        used.add(var)
        if op.target == GETITEM:
            args = op.args if isinstance(op.args, list) else []
            if len(args) != 2:
                raise Unsupported("getitem without two arguments")
            rhs = f"{value_code(args[0], env)}[{value_code(args[1], env)}]"
        else:
            parts = [value_code(a, env) for a in op.args]
            parts += [f"{k}={value_code(v, env)}" for k, v in (op.kwargs or {}).items()]
            rhs = f"{target_call(op.target)}({', '.join(parts)})"
        if comments and op.source:
            lines.append(f"    # {_comment(op.source)}")
        lines.append(f"    {var} = {rhs}")
        env[op.name] = var
    outs = [env[o] for o in program.outputs]
    lines.append(f"    return ({', '.join(outs)},)")
    return "\n".join(lines) + "\n", params


def render(program: Program, info: ReproInfo, *, comments: bool = True) -> str:
    """The full ``repro.py`` text for ``program``."""
    fwd, _ = forward_code(program, comments)
    inputs = "\n".join(
        f"    (({', '.join(str(s) for s in i.shape)}{',' if len(i.shape) == 1 else ''}), "
        f"({', '.join(str(s) for s in i.stride)}{',' if len(i.stride) == 1 else ''}), "
        f"torch.{i.dtype}, {i.device!r}, {i.fill!r}),"
        for i in program.inputs)
    if any(not _DEVICE.match(i.device) for i in program.inputs):
        raise Unsupported("an input has an unknown device")
    if any(i.fill not in _FILLS for i in program.inputs):
        raise Unsupported("an input has an unknown fill")
    config = "\n".join(f"    {k!r}: {_flag_value(v)}," for k, v in sorted(program.flags.items()))
    header = ""
    if comments:
        header = (
            "# Minified repro made by `tuidebug minify`; it needs only torch.\n"
            f"#   trace:   {_comment(info.trace)} (graph {_comment(info.graph)}, "
            f"stage {_comment(info.stage)})\n"
            f"#   failure: {_comment(info.describe)}\n"
            f"#   size:    {info.nodes_before} compute nodes captured -> {program.size} here\n")
    # JSON strings and lists are Python literals (every character escaped as Python would read it)
    expected = json.dumps(info.expected())
    return (_TEMPLATE
            .replace("@@HEADER@@", header)
            .replace("@@CONFIG@@", config)
            .replace("@@EXPECTED@@", expected)
            .replace("@@TOL@@", repr(None if info.tol is None else float(info.tol)))
            .replace("@@JUDGE@@", judge_source())
            .replace("@@FORWARD@@", fwd)
            .replace("@@INPUTS@@", inputs))


JUDGE_MARKER = "# ---- the rule: copied verbatim into repro.py"


def judge_source() -> str:
    """The accuracy judge's rule (``tuidebug.compiler.judge`` after its marker line), the code
    the repro judges with: a repro of an accuracy failure fails for the trace's reason."""
    import importlib.util
    from pathlib import Path

    # located, not imported: the judge module imports torch, the minifier process never does
    spec = importlib.util.find_spec("tuidebug.compiler.judge")
    if spec is None or spec.origin is None:
        raise RuntimeError("tuidebug.compiler.judge is missing from this installation")
    text = Path(spec.origin).read_text()
    _, sep, rule = text.partition(JUDGE_MARKER)
    if not sep:
        raise RuntimeError(f"{spec.origin} lost its marker line {JUDGE_MARKER!r}")
    return rule.split("\n", 1)[1].strip("\n")


def cache_key(program: Program, info: ReproInfo) -> str:
    """The candidate's identity: a hash of its canonical text (no comments, no trace names)."""
    text = render(program, ReproInfo(kind=info.kind, type=info.type, tol=info.tol,
                                     key=info.key, diags=info.diags),
                  comments=False)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


_TEMPLATE = r'''#!/usr/bin/env python3
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


def _compare(actual, expected, reference, why_no_fp64):
    """(mismatch, the judge's verdict) of compiled outputs against eager and float64."""
    verdict = judge(actual, expected, reference, TOL, why_no_fp64)
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
        why = ""
        try:
            torch.manual_seed(SEED)
            reference = forward(*[upcast(x) for x in make_inputs()])
        except Exception as e:  # an op without float64 support: the judge's fallback rules
            reference, why = None, f"{type(e).__name__}: {e}"[:200]
        bad, verdict = _compare(actual, expected, reference, why)
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
