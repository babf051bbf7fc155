"""The graph being built from printed FX code, and statements read with :mod:`ast` (never
executed): each assignment becomes a node of :mod:`tuidebug.trace.format.graph`'s shape. Pure text."""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from tuidebug.trace.format.fx_annotations import parse_annotation

PARAM_RE = re.compile(r"^l_self_modules_(?P<path>.+?)_(?:parameters|buffers)_(?P<attr>\w+?)_$")

_BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
    ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul",
    ast.LShift: "lshift", ast.RShift: "rshift", ast.BitAnd: "and_", ast.BitOr: "or_",
    ast.BitXor: "xor",
}
_UNOPS = {ast.USub: "neg", ast.UAdd: "pos", ast.Not: "not_", ast.Invert: "invert"}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq",
           ast.NotEq: "ne"}

class Builder:
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
        m = PARAM_RE.match(name.lower())
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


def ann_text(a: ast.expr | None) -> str | None:
    if isinstance(a, ast.Constant) and isinstance(a.value, str):
        return a.value
    return None



def slow_statement(b: Builder, code: str, lineno: int, src: dict[str, Any] | None,
                    param_names: set[str], bad: list[int]) -> None:
    try:
        mod = ast.parse(code)
    except SyntaxError:
        bad.append(lineno)
        return
    before = len(b.nodes)
    body = mod.body
    if _inplace(b, body):
        body = body[2:]
    for stmt in body:
        problems: list[str] = []
        _statement(b, stmt, param_names, problems)
        if problems:
            bad.append(lineno)
    for n in b.nodes[before:]:
        if n["op"] != "output":
            n["source"] = src


def _inplace(b: Builder, body: list[ast.stmt]) -> bool:
    """FX's print of an in-place operator node, ``x += y;  name: ann = x``: the node
    ``name = operator.iadd(x, y)`` (True when ``body`` starts so)."""
    if len(body) < 2:
        return False
    aug, then = body[0], body[1]
    if not (isinstance(aug, ast.AugAssign) and isinstance(aug.target, ast.Name)
            and type(aug.op) in _BINOPS):
        return False
    if isinstance(then, ast.AnnAssign) and isinstance(then.target, ast.Name):
        name, value, ann = then.target.id, then.value, ann_text(then.annotation)
    elif isinstance(then, ast.Assign) and len(then.targets) == 1 \
            and isinstance(then.targets[0], ast.Name):
        name, value, ann = then.targets[0].id, then.value, None
    else:
        return False
    if not (isinstance(value, ast.Name) and value.id == aug.target.id):
        return False
    op = _BINOPS[type(aug.op)].rstrip("_")  # and_ -> iand
    b.add(name, "call_function", f"operator.i{op}", [b.value(aug.target), b.value(aug.value)],
          {}, ann)
    return True


def _statement(b: Builder, stmt: ast.stmt, param_names: set[str], problems: list[str]) -> None:
    if isinstance(stmt, ast.AnnAssign):
        if stmt.value is None or not isinstance(stmt.target, ast.Name):
            return
        if not b.call(stmt.target.id, stmt.value, ann_text(stmt.annotation)):
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
