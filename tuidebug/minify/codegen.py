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
from tuidebug.minify.repro_template import TEMPLATE

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
    return (TEMPLATE
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
