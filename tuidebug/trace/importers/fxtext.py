"""Printed FX graphs (``GraphModule.print_readable`` text) -> the graph snapshot JSON shape.

TORCH_TRACE logs and TORCH_COMPILE_DEBUG folders hold graphs only as printed code::

    def forward(self, L_x_: "f32[4, 16][16, 1]cpu"):
        l_x_ = L_x_
        # File: /src/model.py:12 in forward, code: x = self.fc(x)
        linear: "f32[4, 8][8, 1]cpu" = torch._C._nn.linear(l_x_, w, b);  l_x_ = None
        return (linear,)

That text is Python, so it is parsed with :mod:`ast` (never executed) and each statement becomes
one node of :mod:`tuidebug.trace.graph`'s shape: name, op, target, args with ``{"node": NAME}``
references, the dtype/shape/stride/device of its annotation and the source line of the
``# File:`` comment above it. What print_readable does not print (module paths of call nodes,
``requires_grad``) stays empty. A truncated text is parsed up to the last complete statement and
``ParsedGraph.problems`` says so.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.graph import GRAPH_FORMAT

# torch/utils/_dtype_abbrs.py, inverted
_DTYPES = {
    "bf16": "bfloat16", "f64": "float64", "f32": "float32", "f16": "float16",
    "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "f8e4m3fnuz": "float8_e4m3fnuz",
    "f8e5m2fnuz": "float8_e5m2fnuz", "f8e8m0fnu": "float8_e8m0fnu",
    "f4e2m1fn_x2": "float4_e2m1fn_x2",
    "c32": "complex32", "c64": "complex64", "c128": "complex128", "i8": "int8", "i16": "int16",
    "i32": "int32", "i64": "int64", "b8": "bool", "u8": "uint8", "u16": "uint16", "u32": "uint32",
    "u64": "uint64", "bit": "bits8",
}
_ANN_RE = re.compile(r"^(?P<dt>[a-z][a-z0-9_]*)\[(?P<shape>[^\]]*)\](?:\[(?P<stride>[^\]]*)\])?"
                     r"(?P<device>[a-z][\w:]*)?$")
_SYM_RE = re.compile(r"^Sym\((?P<expr>.*)\)$")
_FILE_RE = re.compile(
    r"#\s*File:\s*(?P<file>.+?):(?P<line>\d+) in (?P<fn>[^,]+), code: (?P<code>.*)$")
_NO_STACK = "No stacktrace found for following nodes"
_DEF_RE = re.compile(r"^(?P<indent>\s*)def forward\(")
_PARAM_RE = re.compile(r"^l_self_modules_(?P<path>.+?)_(?:parameters|buffers)_(?P<attr>\w+?)_$")

_BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
    ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul",
    ast.LShift: "lshift", ast.RShift: "rshift", ast.BitAnd: "and_", ast.BitOr: "or_",
    ast.BitXor: "xor",
}
_UNOPS = {ast.USub: "neg", ast.UAdd: "pos", ast.Not: "not_", ast.Invert: "inv"}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq",
           ast.NotEq: "ne"}


@dataclass
class ParsedGraph:
    nodes: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)  # 1-based lines of the text not read

    def to_json(self, graph_id: str = "", stage: str = "") -> dict[str, Any]:
        return {"format": GRAPH_FORMAT, "graph": graph_id, "stage": stage, "nodes": self.nodes}


_ANN_CACHE: dict[str, dict[str, Any] | None] = {}


def parse_annotation(text: str | None) -> dict[str, Any] | None:
    """``"f32[3, 16][16, 1]cpu"`` -> ``{"dtype": "float32", "shape": [3, 16], ...}``."""
    if not text:
        return None
    # cached and shared between nodes: callers must not modify the dict they get
    got = _ANN_CACHE.get(text, False)
    if got is not False:
        return got  # type: ignore[return-value]
    meta = _parse_annotation(text)
    if len(_ANN_CACHE) < 20000:
        _ANN_CACHE[text] = meta
    return meta


def _parse_annotation(text: str) -> dict[str, Any] | None:
    text = text.strip()
    m = _ANN_RE.match(text)
    if m and m["dt"] in _DTYPES:
        meta: dict[str, Any] = {"dtype": _DTYPES[m["dt"]], "shape": _dims(m["shape"])}
        meta["stride"] = _dims(m["stride"]) if m["stride"] is not None else None
        if m["device"]:
            meta["device"] = m["device"]
        return meta
    s = _SYM_RE.match(text)
    if s:
        expr = s["expr"].strip()
        kind = "symfloat" if re.match(r"^z?f\d", expr) else (
            "symbool" if expr in ("True", "False") else "symint")
        return {"dtype": kind, "shape": [], "value": expr}
    return None


def _dims(text: str) -> list[Any]:
    if not text.strip():
        return []
    if "(" not in text:
        return [_dim(x) for x in text.split(",")]
    out: list[Any] = []
    depth = 0
    cur = ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(_dim(cur))
            cur = ""
        else:
            cur += ch
    out.append(_dim(cur))
    return out


def _dim(s: str) -> Any:
    s = s.strip()
    try:
        return int(s)
    except ValueError:
        return s


def _forward_source(text: str) -> tuple[str, int, list[str]]:
    """The ``def forward`` of the outermost module, dedented: (source, first line no, problems)."""
    lines = text.split("\n")
    start = None
    indent = 0
    for i, line in enumerate(lines):
        m = _DEF_RE.match(line)
        if m:
            start, indent = i, len(m["indent"])
            break
    if start is None:
        return "", 0, ["no 'def forward' in the graph text"]
    sig_end = _signature_end(lines, start)
    end = len(lines)
    for j in range(sig_end + 1, len(lines)):
        line = lines[j]
        stripped = line.strip()
        if not stripped:
            continue
        lead = len(line) - len(line.lstrip())
        if lead <= indent:
            end = j  # a nested module class, or the end of the body
            break
    body = [ln[indent:] if ln[:indent].strip() == "" else ln.lstrip() for ln in lines[start:end]]
    return "\n".join(body), start, []


def _signature_end(lines: list[str], start: int) -> int:
    """Index of the line that closes the ``def forward(`` parenthesis."""
    depth = 0
    for j in range(start, len(lines)):
        quote = ""
        for ch in lines[j]:
            if quote:
                if ch == quote:
                    quote = ""
            elif ch in "\"'":
                quote = ch
            elif ch == "#":
                break
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    return j
    return len(lines) - 1


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.by_name: dict[str, dict[str, Any]] = {}

    # -- values ---------------------------------------------------------------------------------
    def value(self, e: ast.expr) -> Any:
        if isinstance(e, ast.Constant):
            v = e.value
            if isinstance(v, float) and not math.isfinite(v):
                return {"repr": repr(v)}
            if v is None or isinstance(v, (bool, int, float, str)):
                return v
            return {"repr": repr(v)}
        if isinstance(e, ast.Name):
            if e.id in self.by_name:
                return {"node": e.id}
            return {"repr": e.id}
        if isinstance(e, (ast.List, ast.Tuple)):
            return [self.value(x) for x in e.elts]
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) \
                and isinstance(e.operand, ast.Constant) \
                and isinstance(e.operand.value, (int, float)):
            v = -e.operand.value
            return v if math.isfinite(v) else {"repr": repr(v)}
        if isinstance(e, ast.Dict):
            return {str(self.value(k) if k is not None else "**"): self.value(v)
                    for k, v in zip(e.keys, e.values, strict=False)}
        if isinstance(e, ast.Attribute):
            d = _dotted(e)
            if d is not None:
                return {"repr": d}
        return {"repr": ast.unparse(e)[:200]}

    # -- nodes ----------------------------------------------------------------------------------
    def add(self, name: str, op: str, target: str, args: list[Any], kwargs: dict[str, Any],
            ann: str | None, refs: list[str] | None = None) -> dict[str, Any]:
        node = {
            "name": name, "op": op, "target": target, "args": args, "kwargs": kwargs,
            "inputs": refs if refs is not None else _refs(args, kwargs), "users": [],
            "tensor": parse_annotation(ann),
            "tensors": None, "source": None,
            "module": "", "module_type": "",
        }
        if name in self.by_name:  # should not happen in FX text; keep names unique
            name = f"{name}__{len(self.nodes)}"
            node["name"] = name
        self.nodes.append(node)
        self.by_name[name] = node
        return node

    def placeholder(self, name: str, ann: str | None) -> None:
        node = self.add(name, "placeholder", name, [], {}, ann)
        m = _PARAM_RE.match(name.lower())
        if m:
            node["module"] = m["path"].replace("_modules_", ".")

    def call(self, name: str, e: ast.expr, ann: str | None) -> bool:
        args: list[Any]
        kwargs: dict[str, Any] = {}
        if isinstance(e, ast.Call):
            f = e.func
            args = [self.value(a) for a in e.args]
            for kw in e.keywords:
                kwargs[kw.arg or "**"] = self.value(kw.value)
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                    and f.value.id in self.by_name:
                self.add(name, "call_method", f.attr, [{"node": f.value.id}] + args, kwargs,
                         ann)
                return True
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                    and f.value.id == "self":
                self.add(name, "call_module", f.attr, args, kwargs, ann)
                return True
            target = _dotted(f) or ast.unparse(f)[:200]
            if target.startswith("torch.ops."):
                target = target[len("torch.ops."):]
            self.add(name, "call_function", target, args, kwargs, ann)
            return True
        if isinstance(e, ast.Subscript):
            idx = e.slice
            self.add(name, "call_function", "operator.getitem",
                     [self.value(e.value), self.value(idx)], {}, ann)
            return True
        if isinstance(e, ast.BinOp) and type(e.op) in _BINOPS:
            self.add(name, "call_function", f"operator.{_BINOPS[type(e.op)]}",
                     [self.value(e.left), self.value(e.right)], {}, ann)
            return True
        if isinstance(e, ast.UnaryOp) and type(e.op) in _UNOPS:
            self.add(name, "call_function", f"operator.{_UNOPS[type(e.op)]}",
                     [self.value(e.operand)], {}, ann)
            return True
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and type(e.ops[0]) in _CMPOPS:
            self.add(name, "call_function", f"operator.{_CMPOPS[type(e.ops[0])]}",
                     [self.value(e.left), self.value(e.comparators[0])], {}, ann)
            return True
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
            self.add(name, "get_attr", e.attr, [], {}, ann)
            return True
        if isinstance(e, ast.Attribute):
            d = _dotted(e)
            if d and d.startswith("self."):
                self.add(name, "get_attr", d[len("self."):], [], {}, ann)
                return True
        return False

    def output(self, e: ast.expr | None) -> None:
        if e is None:
            args: list[Any] = [None]
        elif isinstance(e, ast.Call) and _dotted(e.func) == "pytree.tree_unflatten" and e.args:
            args = [self.value(e.args[0])]
        else:
            args = [self.value(e)]
        self.add("output", "output", "output", args, {}, None)

    def finish(self) -> list[dict[str, Any]]:
        for n in self.nodes:
            for i in n["inputs"]:
                src = self.by_name.get(i)
                if src is not None and n["name"] not in src["users"]:
                    src["users"].append(n["name"])
        # a node whose value is a tuple is not annotated; its getitem users say what it holds
        for n in self.nodes:
            if n["op"] == "output":
                outs = n["args"][0] if n["args"] and isinstance(n["args"][0], list) else None
                if outs is not None:
                    n["tensors"] = [self.by_name[o["node"]]["tensor"]
                                    if isinstance(o, dict) and o.get("node") in self.by_name
                                    else None for o in outs]
                continue
            if n["tensor"] is not None or not n["users"]:
                continue
            metas: dict[int, Any] = {}
            for u in n["users"]:
                un = self.by_name[u]
                a = un["args"]
                if un["target"] == "operator.getitem" and len(a) == 2 and isinstance(a[1], int) \
                        and a[0] == {"node": n["name"]}:
                    metas[a[1]] = un["tensor"]
                else:
                    break
            else:
                if metas:
                    n["tensors"] = [metas.get(i) for i in range(max(metas) + 1)]
        return self.nodes


def _dotted(e: ast.expr) -> str | None:
    parts = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if isinstance(e, ast.Name):
        parts.append(e.id)
        return ".".join(reversed(parts))
    return None


def _refs(args: Any, kwargs: Any) -> list[str]:
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if "node" in v and len(v) == 1:
                if v["node"] not in out:
                    out.append(v["node"])
                return
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(args)
    walk(kwargs)
    return out


def _ann_text(a: ast.expr | None) -> str | None:
    if isinstance(a, ast.Constant) and isinstance(a.value, str):
        return a.value
    return None


# -- the line-based fast path ---------------------------------------------------------------------
# FX prints one node per line: ``name: "ann" = target(args);  a = b = None``. Those lines are read
# with a small tokenizer (about 10x faster than ast.parse on big graphs); anything else, and
# any line the tokenizer does not fully understand, goes through ast.
_STMT_RE = re.compile(r'^(?P<name>[A-Za-z_]\w*)(?:: "(?P<ann>[^"]*)")?(?: = (?P<rhs>.+))?$')
_DEL_RE = re.compile(r"^(?:[A-Za-z_]\w* = )+None$")
_CALL_RE = re.compile(r"^(?P<t>[A-Za-z_][\w.]*)\((?P<a>.*)\)$")
_GETITEM_RE = re.compile(r"^(?P<v>[A-Za-z_]\w*)\[(?P<i>-?\d+)\]$")
_TOKEN_RE = re.compile(r"""\s*(?:(?P<s>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
                       r"""|(?P<n>-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)(?![\w.]))"""
                       r"""|(?P<id>[A-Za-z_][\w.]*)|(?P<p>[\[\](),=]))""")
_CONSTS: dict[str, Any] = {"None": None, "True": True, "False": False}
_SIMPLE_ARGS_RE = re.compile(r"^[A-Za-z_]\w*(?:, [A-Za-z_]\w*)*$")


class _Unsupported(Exception):
    pass


class _ArgParser:
    """Recursive descent over ``_TOKEN_RE`` tokens of a call's argument list."""

    __slots__ = ("text", "toks", "i", "nodes", "refs")

    def __init__(self, text: str, nodes: dict[str, Any]) -> None:
        self.text = text
        self.nodes = nodes
        self.refs: list[str] = []
        toks = []
        pos = 0
        for m in _TOKEN_RE.finditer(text):
            if m.start() != pos:
                raise _Unsupported(text[pos:pos + 20])
            kind = m.lastgroup or ""
            toks.append((kind, m.group(kind), m.start(kind), m.end()))
            pos = m.end()
        if pos != len(text) and text[pos:].strip():
            raise _Unsupported(text[pos:pos + 20])
        self.toks = toks
        self.i = 0

    def peek(self) -> tuple[str, str, int, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str, int, int]:
        if self.i >= len(self.toks):
            raise _Unsupported("end")
        t = self.toks[self.i]
        self.i += 1
        return t

    def arguments(self, close: str | None) -> tuple[list[Any], dict[str, Any]]:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        while True:
            t = self.peek()
            if t is None:
                if close is None:
                    return args, kwargs
                raise _Unsupported("unclosed")
            if t[0] == "p" and t[1] == close:
                self.i += 1
                return args, kwargs
            if t[0] == "id" and self.i + 1 < len(self.toks) and self.toks[self.i + 1][1] == "=" \
                    and self.toks[self.i + 1][0] == "p":
                self.i += 2
                kwargs[t[1]] = self.value()
            else:
                args.append(self.value())
            t = self.peek()
            if t is None:
                if close is None:
                    return args, kwargs
                raise _Unsupported("unclosed")
            if t[0] == "p" and t[1] == ",":
                self.i += 1
            elif not (t[0] == "p" and t[1] == close):
                raise _Unsupported(t[1])

    def value(self) -> Any:
        kind, tok, start, _ = self.take()
        if kind == "id":
            nxt = self.peek()
            if nxt is not None and nxt[0] == "p" and nxt[1] == "(":
                # a call inside an argument: device(type='cpu'), slice(None, None, None)
                self.i += 1
                self.arguments(")")
                end = self.toks[self.i - 1][3]
                return {"repr": self.text[start:end]}
            if tok in _CONSTS:
                return _CONSTS[tok]
            if tok in self.nodes:
                if tok not in self.refs:
                    self.refs.append(tok)
                return {"node": tok}
            return {"repr": tok}
        if kind == "n":
            if "." in tok or "e" in tok or "E" in tok:
                return float(tok)
            return int(tok)
        if kind == "s":
            if "\\" in tok:
                return ast.literal_eval(tok)
            return tok[1:-1]
        if kind == "p" and tok == "[":
            items, kw = self.arguments("]")
            if kw:
                raise _Unsupported("kw in list")
            return items
        if kind == "p" and tok == "(":
            items, kw = self.arguments(")")
            if kw:
                raise _Unsupported("kw in tuple")
            return items
        raise _Unsupported(tok)


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == "\\":
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i].rstrip()
    return line


def _balance(text: str) -> int:
    depth = 0
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth


def _signature(lines: list[str], sig_end: int, problems: list[str]) -> list[tuple[str, str | None]]:
    text = "\n".join(lines[: sig_end + 1]) + "\n    pass\n"
    try:
        mod = ast.parse(text)
    except SyntaxError as e:
        problems.append(f"the graph's signature does not parse ({e.msg})")
        return []
    fn = next((s for s in mod.body if isinstance(s, ast.FunctionDef)), None)
    if fn is None:
        return []
    return [(a.arg, _ann_text(a.annotation)) for a in fn.args.args if a.arg != "self"]


def parse_graph(text: str) -> ParsedGraph:
    """Parse one printed FX graph. Never raises: problems are returned with what was parsed."""
    problems: list[str] = []
    src, first, problems0 = _forward_source(text)
    problems += problems0
    if not src:
        return ParsedGraph([], problems)
    lines = src.split("\n")
    sig_end = _signature_end(lines, 0)
    params = _signature(lines, sig_end, problems)
    b = _Builder()
    param_names = {p for p, _ in params}

    # (lineno, code, source) of each statement; multi-line statements joined
    stmts: list[tuple[int, str, dict[str, Any] | None]] = []
    source: dict[str, Any] | None = None
    acc: list[str] = []
    acc_depth = 0
    acc_line = 0
    acc_src: dict[str, Any] | None = None
    bad: list[int] = []
    for idx in range(sig_end + 1, len(lines)):
        s = lines[idx].strip()
        if not s:
            continue
        if acc:
            part = _strip_comment(s) if "#" in s else s
            acc.append(part)
            acc_depth += _balance(part)
            if acc_depth <= 0:
                stmts.append((acc_line, " ".join(acc), acc_src))
                acc = []
            continue
        if s[0] == "#":
            if "File:" in s:
                m = _FILE_RE.search(s)
                if m:
                    source = {"file": m["file"], "line": int(m["line"]), "fn": m["fn"].strip(),
                              "code": m["code"].strip()}
            elif _NO_STACK in s:
                source = None
            continue
        code = _strip_comment(s) if "#" in s else s
        if code.endswith(("(", "[", "{", ",")):
            depth = _balance(code)
            if depth > 0:
                acc, acc_depth, acc_line, acc_src = [code], depth, idx + 1, source
                continue
        stmts.append((idx + 1, code, source))
    if acc:
        bad.append(acc_line)

    bare = [(st[0], st[1]) for st in stmts if " = " not in st[1] and not st[1].startswith("return")
            and _STMT_RE.match(st[1]) and ": " in st[1]]
    if bare:
        # joint graphs take pytree containers (primals, tangents); the real placeholders are
        # the annotated names flattened out of them
        for _, code in bare:
            m = _STMT_RE.match(code)
            assert m is not None
            b.placeholder(m["name"], m["ann"])
    else:
        for name, ann in params:
            b.placeholder(name, ann)

    for lineno, code, src_loc in stmts:
        try:
            if not _fast_statement(b, code, lineno, src_loc, param_names):
                _slow_statement(b, code, lineno, src_loc, param_names, bad)
        except Exception:
            bad.append(lineno)
    bad_lines = sorted({x + first for x in bad})
    if bad:
        problems.append(
            f"graph text is truncated or corrupt: {len(bad_lines)} statement(s) could not be "
            f"read (at its line {', '.join(map(str, bad_lines[:5]))}); the rest was kept")
    return ParsedGraph(b.finish(), problems, bad_lines)


def _fast_statement(b: _Builder, code: str, lineno: int, src: dict[str, Any] | None,
                    param_names: set[str]) -> bool:
    m = _STMT_RE.match(code)
    if m is None:
        return False
    rhs = m["rhs"]
    name = m["name"]
    if rhs is None:
        return m["ann"] is not None  # a bare "name: ann" placeholder, handled above
    cut = rhs.find(";  ")
    if cut >= 0:
        if not _DEL_RE.match(rhs[cut + 3:]):
            return False
        rhs = rhs[:cut]
    if rhs == "None":
        return True
    if rhs in param_names and rhs in b.by_name and m["ann"] is None:
        node = b.by_name.pop(rhs)  # Dynamo prints a renamed placeholder as "l_x_ = L_x_"
        node["name"] = name
        node["target"] = rhs
        b.by_name[name] = node
        return True
    c = _CALL_RE.match(rhs)
    if c is not None:
        target = c["t"]
        a = c["a"]
        if _SIMPLE_ARGS_RE.match(a):  # "x, y": node names only, the most common case
            args, kwargs, refs = [], {}, []
            nodes = b.by_name
            for tok in a.split(", "):
                if tok in nodes:
                    args.append({"node": tok})
                    if tok not in refs:
                        refs.append(tok)
                elif tok in _CONSTS:
                    args.append(_CONSTS[tok])
                else:
                    args.append({"repr": tok})
        else:
            try:
                ap = _ArgParser(a, b.by_name)
                args, kwargs = ap.arguments(None)
            except (_Unsupported, ValueError, SyntaxError):
                return False
            refs = ap.refs
        base, _, attr = target.rpartition(".")
        if base and base in b.by_name:
            if base not in refs:
                refs.insert(0, base)
            node = b.add(name, "call_method", attr, [{"node": base}] + args, kwargs, m["ann"],
                         refs)
        elif base == "self":
            node = b.add(name, "call_module", attr, args, kwargs, m["ann"], refs)
        else:
            if target.startswith("torch.ops."):
                target = target[10:]
            node = b.add(name, "call_function", target, args, kwargs, m["ann"], refs)
        node["source"] = src
        return True
    g = _GETITEM_RE.match(rhs)
    if g is not None and g["v"] in b.by_name:
        node = b.add(name, "call_function", "operator.getitem", [{"node": g["v"]}, int(g["i"])],
                     {}, m["ann"])
        node["source"] = src
        return True
    return False


def _slow_statement(b: _Builder, code: str, lineno: int, src: dict[str, Any] | None,
                    param_names: set[str], bad: list[int]) -> None:
    try:
        mod = ast.parse(code)
    except SyntaxError:
        bad.append(lineno)
        return
    before = len(b.nodes)
    for stmt in mod.body:
        problems: list[str] = []
        _statement(b, stmt, param_names, problems)
        if problems:
            bad.append(lineno)
    for n in b.nodes[before:]:
        if n["op"] != "output":
            n["source"] = src


def _statement(b: _Builder, stmt: ast.stmt, param_names: set[str], problems: list[str]) -> None:
    if isinstance(stmt, ast.AnnAssign):
        if stmt.value is None or not isinstance(stmt.target, ast.Name):
            return
        if not b.call(stmt.target.id, stmt.value, _ann_text(stmt.annotation)):
            problems.append("not understood")
        return
    if isinstance(stmt, ast.Assign):
        v = stmt.value
        if isinstance(v, ast.Constant) and v.value is None:
            return  # "a = b = None": FX freeing values early
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            return  # "a, b, = fx_pytree.tree_flatten_spec(...)"
        name = stmt.targets[0].id
        if isinstance(v, ast.Name) and v.id in param_names and v.id in b.by_name:
            node = b.by_name.pop(v.id)
            node["name"] = name
            node["target"] = v.id
            b.by_name[name] = node
            return
        if not b.call(name, v, None):
            problems.append("not understood")
        return
    if isinstance(stmt, ast.Return):
        b.output(stmt.value)
        return
    if isinstance(stmt, (ast.Pass, ast.Expr)):
        return
    problems.append("not understood")
