"""The line-based fast path of the FX text parser. Pure text.

FX prints one node per line: ``name: "ann" = target(args);  a = b = None``. Those lines are read
with a small tokenizer (about 10x faster than ast.parse on big graphs); anything else, and any
line the tokenizer does not fully understand, goes through ast (``fx_builder``).
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from tuidebug.trace.format.fx_builder import Builder

STMT_RE = re.compile(r'^(?P<name>[A-Za-z_]\w*)(?:: "(?P<ann>[^"]*)")?(?: = (?P<rhs>.+))?$')
_DEL_RE = re.compile(r"^(?:[A-Za-z_]\w* = )+None$")
_CALL_RE = re.compile(r"^(?P<t>[A-Za-z_][\w.]*)\((?P<a>.*)\)$")
_GETITEM_RE = re.compile(r"^(?P<v>[A-Za-z_]\w*)\[(?P<i>-?\d+)\]$")
_SUBSCRIPT_RE = re.compile(r"^(?P<v>[A-Za-z_]\w*)\[(?P<i>.+)\]$")
_TOKEN_RE = re.compile(r"""\s*(?:(?P<s>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
                       r"""|(?P<n>-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)(?![\w.]))"""
                       r"""|(?P<id>[A-Za-z_][\w.]*)|(?P<p>[\[\](),=]))""")
_CONSTS: dict[str, Any] = {"None": None, "True": True, "False": False}
_SIMPLE_ARGS_RE = re.compile(r"^[A-Za-z_]\w*(?:, [A-Za-z_]\w*)*$")

# what FX prints for the operator module's functions (torch.fx.graph's magic_methods and
# inplace_methods): "a * b", "-a", "a += b;  c = a", and a get_attr node's "self.attr"
BINARY_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv", "%": "mod",
              "**": "pow", "@": "matmul", "<<": "lshift", ">>": "rshift", "&": "and_",
              "|": "or_", "^": "xor", "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq",
              "!=": "ne"}
_INPLACE_OPS = {"+": "iadd", "-": "isub", "*": "imul", "/": "itruediv", "//": "ifloordiv",
                "%": "imod", "**": "ipow", "@": "imatmul", "<<": "ilshift", ">>": "irshift",
                "&": "iand", "|": "ior", "^": "ixor"}
UNARY_OPS = {"-": "neg", "+": "pos", "~": "invert"}
_OP = r"(?:\*\*|//|<<|>>|<=|>=|==|!=|[-+*/%@&|^<>])"
_OPERAND = r"(?:[A-Za-z_][\w.]*|-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
BINARY_RE = re.compile(rf"^(?P<l>{_OPERAND}) (?P<op>{_OP}) (?P<r>{_OPERAND})$")
UNARY_RE = re.compile(r"^(?P<op>[-+~])(?P<v>[A-Za-z_]\w*)$")
SELF_ATTR_RE = re.compile(r"^self\.(?P<attr>[A-Za-z_][\w.]*)$")  # a get_attr node
# "x += 1;  name: ann = x" (then FX's "x = None"): one node, operator.iadd(x, 1)
INPLACE_RE = re.compile(rf"^(?P<x>[A-Za-z_]\w*) (?P<op>{_OP})= (?P<y>{_OPERAND});  "
                        r'(?P<name>[A-Za-z_]\w*)(?:: "(?P<ann>[^"]*)")? = (?P=x)'
                        r"(?:;  (?P<free>(?:[A-Za-z_]\w* = )+None))?$")


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



def statement_value(rhs: str) -> str | None:
    """A statement's right side without FX's ``;  a = b = None`` that frees values; None when
    something else follows the ``;``."""
    cut = rhs.find(";  ")
    if cut < 0:
        return rhs
    return rhs[:cut] if _DEL_RE.match(rhs[cut + 3:]) else None


def _operand(b: Builder, tok: str) -> Any:
    """An operand of ``BINARY_RE`` as the ast reading gives it (``Builder.value``)."""
    if tok[0].isdigit() or tok[0] == "-":
        if "." in tok or "e" in tok or "E" in tok:
            v = float(tok)
            return v if math.isfinite(v) else {"repr": repr(v)}
        return int(tok)
    if tok in _CONSTS:
        return _CONSTS[tok]
    return {"node": tok} if tok in b.by_name else {"repr": tok}


def _inplace(b: Builder, code: str, src: dict[str, Any] | None) -> bool:
    m = INPLACE_RE.match(code)
    if m is None or m["op"] not in _INPLACE_OPS:
        return False
    node = b.add(m["name"], "call_function", f"operator.{_INPLACE_OPS[m['op']]}",
                 [_operand(b, m["x"]), _operand(b, m["y"])], {}, m["ann"])
    node["source"] = src
    return True


def fast_statement(b: Builder, code: str, lineno: int, src: dict[str, Any] | None,
                    param_names: set[str]) -> bool:
    m = STMT_RE.match(code)
    if m is None:
        return _inplace(b, code, src)
    rhs = m["rhs"]
    name = m["name"]
    if rhs is None:
        return m["ann"] is not None  # a bare "name: ann" placeholder, handled above
    rhs = statement_value(rhs)
    if rhs is None:
        return False
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
    node = _expression(b, name, rhs, m["ann"])
    if node is None:
        return False
    node["source"] = src
    return True


def _expression(b: Builder, name: str, rhs: str, ann: str | None) -> dict[str, Any] | None:
    """The node of an operator FX prints as an expression (``a * 2``, ``-a``, ``a[(…)]``) or of
    a get_attr (``self.attr``), as ``Builder.call`` reads it; None for anything else."""
    e = BINARY_RE.match(rhs)
    if e is not None:
        left = e["l"]
        if left[0] == "-":  # "-2 ** x" reads as -(2 ** x)
            return None
        return b.add(name, "call_function", f"operator.{BINARY_OPS[e['op']]}",
                     [_operand(b, left), _operand(b, e["r"])], {}, ann)
    e = UNARY_RE.match(rhs)
    if e is not None:
        return b.add(name, "call_function", f"operator.{UNARY_OPS[e['op']]}",
                     [_operand(b, e["v"])], {}, ann)
    e = SELF_ATTR_RE.match(rhs)
    if e is not None:
        return b.add(name, "get_attr", e["attr"], [], {}, ann)
    e = _SUBSCRIPT_RE.match(rhs)
    if e is not None:
        try:
            ap = _ArgParser(e["i"], b.by_name)
            index, kw = ap.arguments(None)
        except (_Unsupported, ValueError, SyntaxError):
            return None
        if len(index) != 1 or kw:
            return None
        return b.add(name, "call_function", "operator.getitem",
                     [_operand(b, e["v"]), index[0]], {}, ann)
    return None

