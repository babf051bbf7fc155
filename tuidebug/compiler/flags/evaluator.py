"""A restricted evaluator for expressions of Inductor's ``config.py``, run on its ``ast``.

Literals, operators, comparisons and conditionals over names already known are evaluated; with an
environment (``Evaluator(environ)``) also reads of it (``os.environ.get``, ``os.getenv``,
``os.environ[...]``, ``get_tristate_env``), ``int``/``float``/``str``/``bool``, a few ``str``
methods and config.py's own helper functions made of ``if``, ``return`` and assignments. Anything
else raises :class:`Unknown`: nothing from config.py is ever run.
"""

from __future__ import annotations

import ast
import functools
import operator as op
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


class Unknown(Exception):
    """The expression cannot be evaluated statically."""


UNKNOWN = object()
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: op.add, ast.Sub: op.sub, ast.Mult: op.mul, ast.Div: op.truediv, ast.Pow: op.pow,
    ast.FloorDiv: op.floordiv, ast.Mod: op.mod, ast.LShift: op.lshift, ast.RShift: op.rshift,
    ast.BitOr: op.or_, ast.BitAnd: op.and_, ast.BitXor: op.xor,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: op.eq, ast.NotEq: op.ne, ast.Lt: op.lt, ast.LtE: op.le, ast.Gt: op.gt, ast.GtE: op.ge,
    ast.Is: op.is_, ast.IsNot: op.is_not, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_UNOPS: dict[type, Callable[[Any], Any]] = {
    ast.USub: op.neg, ast.UAdd: op.pos, ast.Not: op.not_, ast.Invert: op.invert,
}
ENV_READERS = {"os.environ.get", "os.getenv", "environ.get", "getenv", "get_tristate_env"}
_CONVERSIONS: dict[str, Callable[..., Any]] = {"int": int, "float": float, "str": str, "bool": bool}
_STR_METHODS = {"upper", "lower", "strip", "split", "startswith", "endswith"}
_FELL_THROUGH = object()  # a helper's body ended without `return`


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return f"{dotted(node.value)}.{node.attr}" if isinstance(node, ast.Attribute) else ""


def str_const(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def jsonable(value: Any) -> Any:
    """Sets become sorted lists; raise Unknown for anything json.dumps would reject."""
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=repr)
    if isinstance(value, (list, tuple)):
        return type(value)(jsonable(v) for v in value)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    raise Unknown


@dataclass
class Scope:
    """What a module or class body has defined so far."""

    parent: Scope | None = None
    exprs: dict[str, ast.expr] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)  # UNKNOWN when not computable
    types: dict[str, str] = field(default_factory=dict)
    declared: dict[str, ast.AnnAssign] = field(default_factory=dict)  # bare `x: T` lines

    def lookup(self, table: str, name: str, missing: Any = None) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if name in getattr(scope, table):
                return getattr(scope, table)[name]
            scope = scope.parent
        return missing


class Evaluator:
    """Evaluates expressions in a :class:`Scope`. ``environ``: evaluate what reads the
    environment with it; None evaluates nothing that depends on it. ``funcs``: config.py's
    module-level functions, callable as helpers; ``module``: its module scope."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ = environ
        self.module = Scope()
        self.funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.depth = 0  # helper-function calls being evaluated

    def _try_eval(self, node: ast.expr | None, scope: Scope) -> Any:
        try:
            return None if node is None else self._eval(node, scope)
        except Exception:
            return None

    def _eval(self, node: ast.expr, scope: Scope) -> Any:
        ev = functools.partial(self._eval, scope=scope)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                raise Unknown
            return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](map(ev, node.elts))
        if isinstance(node, ast.Dict) and None not in node.keys:
            return {ev(k): ev(v) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
            return _UNOPS[type(node.op)](ev(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.BoolOp):
            for operand in node.values:  # short-circuits like Python: `a or b` -> first truthy
                result = ev(operand)
                if bool(result) == isinstance(node.op, ast.Or):
                    break
            return result
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for cmp, right_node in zip(node.ops, node.comparators):
                right = ev(right_node)
                if not _CMPOPS[type(cmp)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return ev(node.body) if ev(node.test) else ev(node.orelse)
        if isinstance(node, ast.Name) and node.id == "TYPE_CHECKING":
            return False
        if isinstance(node, ast.Name) and scope.lookup("values", node.id, UNKNOWN) is not UNKNOWN:
            return scope.lookup("values", node.id)
        fn = dotted(node.func) if isinstance(node, ast.Call) else ""
        if fn.endswith("is_fbcode"):
            return False  # an installed wheel is an OSS build
        if fn in ("cast", "typing.cast") and isinstance(node, ast.Call) and len(node.args) == 2:
            return ev(node.args[1])
        if self.environ is not None:
            return self._eval_env(node, scope)
        raise Unknown

    def _eval_env(self, node: ast.expr, scope: Scope) -> Any:
        """What only an environment makes computable: reads of it, conversions, str methods and
        config.py's helper functions (see :func:`values_in_force`)."""
        env = self.environ
        assert env is not None
        ev = functools.partial(self._eval, scope=scope)
        if dotted(node) == "os.environ":
            return env
        if isinstance(node, ast.Subscript) and dotted(node.value) == "os.environ":
            key = ev(node.slice)
            if key not in env:  # a KeyError when torch imports config.py
                raise Unknown
            return env[key]
        if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
            raise Unknown
        fn = dotted(node.func)
        args = [ev(a) for a in node.args]
        kwargs = {k.arg: ev(k.value) for k in node.keywords if k.arg}
        if fn in ("os.environ.get", "environ.get", "os.getenv", "getenv"):
            return env.get(*args, **kwargs)
        if fn == "get_tristate_env":  # torch.utils._config_module.get_tristate_env
            value = env.get(args[0])
            fallback = args[1] if len(args) > 1 else kwargs.get("default")
            return True if value == "1" else False if value == "0" else fallback
        if fn in _CONVERSIONS:
            return _CONVERSIONS[fn](*args, **kwargs)
        if isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS:
            obj = ev(node.func.value)
            if isinstance(obj, str):
                return getattr(obj, node.func.attr)(*args, **kwargs)
        if fn in self.funcs:
            return self._call_helper(self.funcs[fn], args, kwargs)
        raise Unknown

    def _call_helper(self, func: ast.FunctionDef | ast.AsyncFunctionDef, args: list[Any],
                     kwargs: dict[str, Any]) -> Any:
        """A config.py helper called with evaluated arguments, if its body is only ``if``,
        ``return`` and assignments to names (its docstring aside)."""
        a = func.args
        if self.depth > 8 or isinstance(func, ast.AsyncFunctionDef) or a.vararg or a.kwarg \
                or a.posonlyargs or a.kwonlyargs:
            raise Unknown
        params = [p.arg for p in a.args]
        bound = dict(zip(params, args), **kwargs)
        for p, d in zip(params[len(params) - len(a.defaults):], a.defaults):
            bound.setdefault(p, self._eval(d, self.module))
        if len(args) > len(params) or set(bound) != set(params):
            raise Unknown
        local = Scope(parent=self.module, values=bound)
        self.depth += 1
        try:
            result = self._run_body(func.body, local)
        finally:
            self.depth -= 1
        return None if result is _FELL_THROUGH else result

    def _run_body(self, body: list[ast.stmt], scope: Scope) -> Any:
        for stmt in body:
            if isinstance(stmt, ast.Return):
                return None if stmt.value is None else self._eval(stmt.value, scope)
            if isinstance(stmt, ast.If):
                result = self._run_body(stmt.body if self._eval(stmt.test, scope) else stmt.orelse,
                                        scope)
                if result is not _FELL_THROUGH:
                    return result
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], ast.Name):
                scope.values[stmt.targets[0].id] = self._eval(stmt.value, scope)
            elif not (isinstance(stmt, ast.Expr) and str_const(stmt.value) is not None):
                raise Unknown  # anything but a docstring: imports, loops, calls for effect
        return _FELL_THROUGH
