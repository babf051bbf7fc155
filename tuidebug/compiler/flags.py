"""Registry of every ``torch._inductor.config`` flag, read from source without importing torch.

``import torch._inductor`` costs seconds, so the viewer never does it: the installed torch is found
with ``importlib.util.find_spec`` and ``_inductor/config.py`` is parsed with ``ast``, following the
rules of ``torch.utils._config_module.install_config_module`` (public module-level values,
``Config(...)`` entries, nested classes, ``@inherit_fields_from``).

Defaults are computed only for literals and simple expressions of them. The build is taken to be
OSS (``is_fbcode()`` is False) and the registry never reads the environment: a default that reads
an environment variable has ``default=None``, its source in ``default_repr`` and the names in
``env``. :func:`values_in_force` evaluates those defaults with an environment (this process's by
default), still without running config.py: only reads of the environment (``os.environ.get``,
``os.getenv``, ``os.environ[...]``, ``in os.environ``, ``get_tristate_env``), ``int``/``float``/
``str``/``bool``, a few ``str`` methods and config.py's own helper functions made of ``if``,
``return`` and assignments are evaluated; anything else stays unknown.
"""

from __future__ import annotations

import ast
import difflib
import fnmatch
import functools
import importlib.util
import inspect
import io
import json
import operator as op
import re
import tokenize
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping

from tuidebug.errors import FlagValueError, UnknownFlag

__all__ = ["Flag", "FlagValueError", "InForce", "Registry", "UnknownFlag", "default_config_path",
           "flags_main", "load_registry", "values_in_force"]


@dataclass(frozen=True)
class Flag:
    name: str  # dotted, e.g. "triton.cudagraphs"
    type: str  # e.g. "bool", "int | None", "Literal['a', 'b']"
    default: Any  # JSON-able default; None when it cannot be computed statically
    default_repr: str | None  # source of the default when it could not be computed
    env: tuple[str, ...] = ()  # environment variables the default depends on
    choices: tuple[Any, ...] | None = None  # values allowed by a Literal[...] annotation
    doc: str = ""
    line: int = 0  # line number in config.py

    @property
    def default_known(self) -> bool:
        return self.default_repr is None

    @property
    def summary(self) -> str:
        return self.doc.split("\n", 1)[0]

    def __hash__(self) -> int:  # defaults may be lists or dicts
        return hash(self.name)


# ---------------------------------------------------------------------------- static evaluation


class _Unknown(Exception):
    """The expression cannot be evaluated statically."""


_UNKNOWN = object()
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
_ENV_READERS = {"os.environ.get", "os.getenv", "environ.get", "getenv", "get_tristate_env"}
_CONVERSIONS: dict[str, Callable[..., Any]] = {"int": int, "float": float, "str": str, "bool": bool}
_STR_METHODS = {"upper", "lower", "strip", "split", "startswith", "endswith"}
_FELL_THROUGH = object()  # a helper's body ended without `return`
_LINT_COMMENT = re.compile(r"^(type|pyrefly|pyre-\w+|noqa|fmt|mypy|ruff|pylint|isort)\b")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return f"{_dotted(node.value)}.{node.attr}" if isinstance(node, ast.Attribute) else ""


def _str_const(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _jsonable(value: Any) -> Any:
    """Sets become sorted lists; raise _Unknown for anything json.dumps would reject."""
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=repr)
    if isinstance(value, (list, tuple)):
        return type(value)(_jsonable(v) for v in value)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    raise _Unknown


def _union(types: list[str]) -> str:
    parts = list(dict.fromkeys(p for t in types for p in t.split(" | ")))
    return "Any" if "Any" in parts else " | ".join(sorted(parts, key=lambda p: p == "None"))


@dataclass
class _Scope:
    """What a module or class body has defined so far."""

    parent: _Scope | None = None
    exprs: dict[str, ast.expr] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)  # _UNKNOWN when not computable
    types: dict[str, str] = field(default_factory=dict)
    declared: dict[str, ast.AnnAssign] = field(default_factory=dict)  # bare `x: T` lines

    def lookup(self, table: str, name: str, missing: Any = None) -> Any:
        scope: _Scope | None = self
        while scope is not None:
            if name in getattr(scope, table):
                return getattr(scope, table)[name]
            scope = scope.parent
        return missing


# ---------------------------------------------------------------------------- the parser


class _ConfigParser:
    """``environ``: evaluate what reads the environment with it (see :func:`values_in_force`);
    None (the registry) reads nothing."""

    def __init__(self, source: str, environ: Mapping[str, str] | None = None) -> None:
        self.lines = source.splitlines()
        self.comments: dict[int, tuple[int, str]] = {}  # row -> (column, text after '#')
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                self.comments[tok.start[0]] = (tok.start[1], tok.string.lstrip("#").strip())
        self.tree = ast.parse(source)
        self.module = _Scope()
        self.funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.non_values: set[str] = set()  # names bound to imports, functions and classes
        self.classes: dict[str, dict[str, Flag]] = {}  # "cpp." -> {"simdlen": Flag}
        self.flags: dict[str, Flag] = {}
        self.anchor: ast.stmt | None = None  # the `if`/`try` holding the current statement
        self.in_try = 0  # inside a `try`, defaults are not computed
        self.environ = environ
        self.current: dict[str, Any] = {}  # with environ: the value in force, where known
        self.aliases: dict[str, str] = {}  # flag -> the dotted name it aliases
        self.depth = 0  # helper-function calls being evaluated

    def parse(self) -> dict[str, Flag]:
        self._walk(self.tree.body, "", self.module)
        return self.flags

    def _walk(self, body: list[ast.stmt], prefix: str, scope: _Scope) -> None:
        for stmt, nxt in zip(body, [*body[1:], None]):
            if isinstance(stmt, ast.If):  # `if is_fbcode(): ... else: ...`, `if TYPE_CHECKING:`
                try:
                    branches = [stmt.body if self._eval(stmt.test, scope) else stmt.orelse]
                except Exception:  # _Unknown, or a TypeError from comparing odd values
                    branches = [stmt.body, stmt.orelse]
                outer, self.anchor = self.anchor, self.anchor or stmt  # its comments document them
                for branch in branches:
                    self._walk(branch, prefix, scope)
                self.anchor = outer
            elif isinstance(stmt, ast.Try):  # which branch runs is unknowable: walk all, trust none
                outer, self.anchor, self.in_try = self.anchor, self.anchor or stmt, self.in_try + 1
                handlers = [s for h in stmt.handlers for s in h.body]
                self._walk(stmt.body + stmt.orelse + handlers + stmt.finalbody, prefix, scope)
                self.anchor, self.in_try = outer, self.in_try - 1
            elif isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                self.non_values.add(stmt.name)
                if isinstance(stmt, ast.ClassDef) and not stmt.name.startswith("_"):
                    self._walk_class(stmt, prefix)
                elif scope is self.module and not isinstance(stmt, ast.ClassDef):
                    self.funcs[stmt.name] = stmt
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.non_values.update((a.asname or a.name).split(".")[0] for a in stmt.names)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if stmt.value is None:
                    scope.declared[stmt.target.id] = stmt
                else:
                    self._entry(stmt.target.id, stmt.annotation, stmt, nxt, prefix, scope)
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:  # `a = b = 1` defines both; `a, b = ...` is skipped
                    if isinstance(target, ast.Name):
                        decl = scope.declared.get(target.id)  # `x: T` then `x = ...` in an `if`
                        ann = decl.annotation if decl else None
                        self._entry(target.id, ann, stmt, nxt, prefix, scope)

    def _walk_class(self, cls: ast.ClassDef, prefix: str) -> None:
        inner = f"{prefix}{cls.name}."
        before = set(self.flags)
        self._walk(cls.body, inner, _Scope(parent=self.module))  # not the enclosing class's names
        own = {n[len(inner):]: f for n, f in self.flags.items()
               if n not in before and n.count(".") == inner.count(".")}
        for deco in cls.decorator_list:  # @inherit_fields_from(parent) copies fields not overridden
            if isinstance(deco, ast.Call) and _dotted(deco.func).endswith("inherit_fields_from"):
                base = _dotted(deco.args[0]) if deco.args else ""
                for key, flag in self.classes.get(f"{prefix}{base}.", {}).items():
                    if key not in own:
                        own[key] = self.flags[inner + key] = replace(flag, name=inner + key)
                        if flag.name in self.current:
                            self.current[inner + key] = self.current[flag.name]
        self.classes[inner] = own

    def _entry(self, name: str, ann: ast.expr | None, stmt: ast.Assign | ast.AnnAssign,
               nxt: ast.stmt | None, prefix: str, scope: _Scope) -> None:
        value = stmt.value
        if value is None or isinstance(value, ast.Name) and value.id in self.non_values:
            return  # a function, class or module: install_config_module skips those
        node: ast.expr | None = value
        env: list[str] = []
        config_env: dict[str, list[str]] = {}
        alias = default_repr = None
        if isinstance(value, ast.Call) and _dotted(value.func).rsplit(".", 1)[-1] == "Config":
            # Config(default=..., alias=..., env_name_force=..., env_name_default=..., justknob=...)
            kw = {k.arg: k.value for k in value.keywords if k.arg}
            node, alias = kw.get("default", value.args[0] if value.args else None), kw.get("alias")
            for key in ("env_name_force", "env_name_default"):
                names = self._try_eval(kw.get(key), scope)
                config_env[key] = [names] if isinstance(names, str) else list(names or ())
                env += config_env[key]
        default = None
        if alias is not None:
            self.aliases[prefix + name] = str(self._try_eval(alias, scope))
            default_repr = f"alias of {self._try_eval(alias, scope)}"
        elif node is not None:
            env += self._env(node, scope, {}, frozenset())
            try:
                if self.in_try:
                    raise _Unknown
                default = _jsonable(self._eval(node, scope))
            except Exception:  # _Unknown, or e.g. a TypeError from `"a" + 1`
                default_repr = self._source(node) + ("  # in a try block" if self.in_try else "")
        known = node is not None and default_repr is None
        if ann is not None:
            type_str = _str_const(ann) or ast.unparse(ann)
        elif known and default is not None:
            type_str = type(default).__name__
        else:
            type_str = self._infer(node, scope) if node is not None else "Any"
            type_str = "Any" if type_str == "None" else type_str
        scope.exprs[name], scope.types[name] = value, type_str
        scope.values[name] = default if known else _UNKNOWN
        if name.startswith("_"):
            return
        if self.environ is not None:
            current = _in_force(self.environ, config_env, default if known else _UNKNOWN)
            if current is not _UNKNOWN:
                self.current[prefix + name] = current
        decl = scope.declared.get(name, stmt)
        doc = self._comments_for(decl) or self._comments_for(stmt)
        if not doc and self.anchor is not None:
            doc = self._comments_for(self.anchor, trailing=False)
        docstring = _str_const(nxt.value) if isinstance(nxt, ast.Expr) else None
        if docstring is not None:  # a string literal right after the assignment
            doc = "\n".join(p for p in (doc, inspect.cleandoc(docstring)) if p)
        self.flags[prefix + name] = Flag(
            prefix + name, type_str, default, default_repr, tuple(dict.fromkeys(env)),
            _TypeSpec.parse(type_str).choices, doc, decl.lineno)

    def _is_code(self, row: int) -> bool:
        """Whether the line holding a comment has code before it."""
        return bool(self.lines[row - 1][: self.comments[row][0]].strip())

    def _comments_for(self, stmt: ast.stmt, trailing: bool = True) -> str:
        """The comment block right above ``stmt`` plus comments trailing its lines."""
        above: list[str] = []
        row = stmt.lineno - 1
        while row in self.comments and not self._is_code(row):
            above.insert(0, self.comments[row][1])
            row -= 1
        rows = range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1) if trailing else ()
        after = [self.comments[r][1] for r in rows if r in self.comments and self._is_code(r)]
        return "\n".join(t for t in above + after if not _LINT_COMMENT.match(t)).strip()

    def _source(self, node: ast.expr) -> str:
        """Source text of an expression on one line, comments removed."""
        end_row = node.end_lineno or node.lineno
        pieces = []
        for row in range(node.lineno, end_row + 1):
            text = self.lines[row - 1]
            end = node.end_col_offset if row == end_row else len(text)
            end = min(end or len(text), self.comments.get(row, (len(text),))[0])
            pieces.append(text[node.col_offset if row == node.lineno else 0 : end].strip())
        joined = " ".join(p for p in pieces if p)
        return re.sub(r",?\s+([)\]}])", r"\1", re.sub(r"([(\[{])\s+", r"\1", joined))

    def _try_eval(self, node: ast.expr | None, scope: _Scope) -> Any:
        try:
            return None if node is None else self._eval(node, scope)
        except Exception:
            return None

    def _eval(self, node: ast.expr, scope: _Scope) -> Any:
        ev = functools.partial(self._eval, scope=scope)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                raise _Unknown
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
        if isinstance(node, ast.Name) and scope.lookup("values", node.id, _UNKNOWN) is not _UNKNOWN:
            return scope.lookup("values", node.id)
        fn = _dotted(node.func) if isinstance(node, ast.Call) else ""
        if fn.endswith("is_fbcode"):
            return False  # an installed wheel is an OSS build
        if fn in ("cast", "typing.cast") and isinstance(node, ast.Call) and len(node.args) == 2:
            return ev(node.args[1])
        if self.environ is not None:
            return self._eval_env(node, scope)
        raise _Unknown

    def _eval_env(self, node: ast.expr, scope: _Scope) -> Any:
        """What only an environment makes computable: reads of it, conversions, str methods and
        config.py's helper functions (see :func:`values_in_force`)."""
        env = self.environ
        assert env is not None
        ev = functools.partial(self._eval, scope=scope)
        if _dotted(node) == "os.environ":
            return env
        if isinstance(node, ast.Subscript) and _dotted(node.value) == "os.environ":
            key = ev(node.slice)
            if key not in env:  # a KeyError when torch imports config.py
                raise _Unknown
            return env[key]
        if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
            raise _Unknown
        fn = _dotted(node.func)
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
        raise _Unknown

    def _call_helper(self, func: ast.FunctionDef | ast.AsyncFunctionDef, args: list[Any],
                     kwargs: dict[str, Any]) -> Any:
        """A config.py helper called with evaluated arguments, if its body is only ``if``,
        ``return`` and assignments to names (its docstring aside)."""
        a = func.args
        if self.depth > 8 or isinstance(func, ast.AsyncFunctionDef) or a.vararg or a.kwarg \
                or a.posonlyargs or a.kwonlyargs:
            raise _Unknown
        params = [p.arg for p in a.args]
        bound = dict(zip(params, args), **kwargs)
        for p, d in zip(params[len(params) - len(a.defaults):], a.defaults):
            bound.setdefault(p, self._eval(d, self.module))
        if len(args) > len(params) or set(bound) != set(params):
            raise _Unknown
        local = _Scope(parent=self.module, values=bound)
        self.depth += 1
        try:
            result = self._run_body(func.body, local)
        finally:
            self.depth -= 1
        return None if result is _FELL_THROUGH else result

    def _run_body(self, body: list[ast.stmt], scope: _Scope) -> Any:
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
            elif not (isinstance(stmt, ast.Expr) and _str_const(stmt.value) is not None):
                raise _Unknown  # anything but a docstring: imports, loops, calls for effect
        return _FELL_THROUGH

    def _env(self, node: ast.AST, scope: _Scope, bind: dict[str, str],
             seen: frozenset[str]) -> list[str]:
        """Environment variables read by an expression, following module helpers and names.

        ``bind`` maps parameters of the helper being walked to constant string arguments."""

        def arg(a: ast.expr) -> list[str]:
            name = _str_const(a) or (bind.get(a.id) if isinstance(a, ast.Name) else None)
            return [name] if name else []

        out: list[str] = []
        for sub in ast.walk(node):
            fn = _dotted(sub.func) if isinstance(sub, ast.Call) else ""
            if isinstance(sub, ast.Call) and fn in _ENV_READERS and sub.args:
                out += arg(sub.args[0])
            elif isinstance(sub, ast.Call) and fn in self.funcs and fn not in seen:
                func = self.funcs[fn]
                args = dict(zip((p.arg for p in func.args.args), sub.args))
                args.update({k.arg: k.value for k in sub.keywords if k.arg})
                consts = {p: s for p, a in args.items() if (s := _str_const(a)) is not None}
                out += self._env(func, self.module, consts, seen | {fn})
            elif isinstance(sub, ast.Subscript) and _dotted(sub.value) == "os.environ":
                out += arg(sub.slice)
            elif isinstance(sub, ast.Compare) and _dotted(sub.comparators[0]) == "os.environ":
                out += arg(sub.left)
            elif isinstance(sub, ast.Name) and sub.id not in seen and scope.lookup("exprs", sub.id):
                out += self._env(scope.lookup("exprs", sub.id), scope, {}, seen | {sub.id})
        return out

    def _infer(self, node: ast.expr, scope: _Scope) -> str:
        """Best-effort type of a default that could not be evaluated."""
        if isinstance(node, ast.Constant):
            return "None" if node.value is None else type(node.value).__name__
        if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            return type(node).__name__.lower()
        if isinstance(node, ast.Compare) or isinstance(getattr(node, "op", None), ast.Not):
            return "bool"
        if isinstance(node, (ast.BoolOp, ast.IfExp)):
            operands = node.values if isinstance(node, ast.BoolOp) else [node.body, node.orelse]
            return _union([self._infer(v, scope) for v in operands])
        if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.Div):  # "a" + "b", 2 * 3
            left, right = self._infer(node.left, scope), self._infer(node.right, scope)
            return left if left == right else "Any"
        if isinstance(node, ast.Name):
            return scope.lookup("types", node.id) or "Any"
        return self._infer_call(node, scope) if isinstance(node, ast.Call) else "Any"

    def _infer_call(self, node: ast.Call, scope: _Scope) -> str:
        fn, args = _dotted(node.func), node.args
        if fn in ("int", "float", "str", "bool", "tuple", "list", "dict", "set"):
            return fn
        if fn in ("cast", "typing.cast") and args:
            return ast.unparse(args[0])
        if fn in ("os.environ.get", "os.getenv"):  # the fallback's type, or str | None
            fallback = self._infer(args[1], scope) if len(args) > 1 else "None"
            return "str | None" if fallback == "None" else fallback
        if fn.endswith("is_fbcode"):
            return "bool"
        if fn == "get_tristate_env":
            return "bool | None"
        if fn.startswith("os.path.") or fn.rsplit(".", 1)[-1] in ("upper", "lower", "strip"):
            return "str"
        returns = self.funcs[fn].returns if fn in self.funcs else None
        return ast.unparse(returns) if returns is not None else "Any"


def _env_value(environ: Mapping[str, str], var: str) -> Any:
    """An environment variable as a ``Config(env_name_...)`` entry reads it (``"1"``/``"0"`` are
    booleans; torch.utils._config_module._read_env_variable)."""
    value = environ.get(var)
    return True if value == "1" else False if value == "0" else value


def _in_force(environ: Mapping[str, str], config_env: dict[str, list[str]], default: Any) -> Any:
    """A flag's value before anything patches it: a ``Config`` entry's ``env_name_force``, then
    its ``env_name_default``, then the default."""
    for key in ("env_name_force", "env_name_default"):
        for var in config_env.get(key, ()):
            value = _env_value(environ, var)
            if value is not None:
                return value
    return default


# ---------------------------------------------------------------------------- value parsing


_TRUE, _FALSE = {"true", "1", "yes", "on", "y", "t"}, {"false", "0", "no", "off", "n", "f"}


def _subscript_args(node: ast.Subscript) -> list[ast.expr]:
    return node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]


def _union_parts(node: ast.expr) -> list[ast.expr]:
    """``A | B``, ``Optional[A]``, ``Union[A, B]`` and quoted annotations, flattened."""
    quoted = _str_const(node)
    if quoted is not None:
        return _union_parts(ast.parse(quoted, mode="eval").body)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union_parts(node.left) + _union_parts(node.right)
    if isinstance(node, ast.Subscript) and _dotted(node.value).endswith("Optional"):
        return _union_parts(node.slice) + [ast.Constant(None)]
    if isinstance(node, ast.Subscript) and _dotted(node.value).endswith("Union"):
        return [p for e in _subscript_args(node) for p in _union_parts(e)]
    return [node]


@dataclass(frozen=True)
class _TypeSpec:
    """What a flag's type accepts: some of bool/int/float/str/none/json/any, Literal choices."""

    type_str: str
    kinds: frozenset[str]
    choices: tuple[Any, ...] | None = None
    container: str | None = None  # list/tuple/set/dict, for JSON values

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def parse(type_str: str) -> _TypeSpec:
        kinds: set[str] = set()
        choices: list[Any] = []
        container = None
        try:
            parts = _union_parts(ast.parse(type_str, mode="eval").body)
        except SyntaxError:
            parts = [ast.Name("Any")]
        for part in parts:
            sub = part if isinstance(part, ast.Subscript) else None
            head = _dotted(sub.value if sub else part).rsplit(".", 1)[-1]
            if isinstance(part, ast.Constant) and part.value is None or head == "None":
                kinds.add("none")
            elif head in ("bool", "int", "float", "str") and not sub:
                kinds.add(head)
            elif head == "Literal" and sub:
                try:
                    choices += [ast.literal_eval(e) for e in _subscript_args(sub)]
                except ValueError:  # Literal[SomeEnum.X]: cannot check statically
                    kinds.add("any")
            elif head in ("Any", "object"):
                kinds.add("any")
            else:  # containers, callables, classes: accept JSON
                kinds.add("json")
                container = head if head in ("list", "tuple", "set", "dict") else container
        return _TypeSpec(type_str, frozenset(kinds), tuple(choices) or None, container)

    def describe(self) -> str:
        words = {"bool": "a bool (true/false)", "int": "an int", "float": "a float",
                 "str": "a string", "json": f"JSON for {self.type_str}",
                 "any": "any JSON value or string"}
        parts = [words[k] for k in words if k in self.kinds]
        if self.choices:
            parts.insert(0, "one of " + ", ".join(map(repr, self.choices)))
        parts += ["None"] if "none" in self.kinds else []
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]

    def convert(self, text: str) -> Any:
        t = text.strip()
        low = t.lower()
        if "none" in self.kinds and low in ("none", "null"):
            return None
        for choice in self.choices or ():
            as_bool = low in _TRUE if isinstance(choice, bool) and low in _TRUE | _FALSE else None
            if t == str(choice) or as_bool is choice:
                return choice
        int_like = "int" in self.kinds and low in ("0", "1")  # for `int | bool`, "1" is an int
        if "bool" in self.kinds and low in _TRUE | _FALSE and not int_like:
            return low in _TRUE
        for kind, conv in (("int", int), ("float", float)):
            if kind in self.kinds:
                try:
                    return conv(t)
                except ValueError:
                    pass
        if "str" in self.kinds:
            return text
        if not self.kinds & {"json", "any"}:
            raise ValueError(text)
        try:
            value = json.loads(t)
        except ValueError:
            if "any" in self.kinds:
                return text
            raise
        if self.container and not isinstance(value, dict if self.container == "dict" else list):
            raise ValueError(text)
        return {"tuple": tuple, "set": set}.get(self.container or "", lambda v: v)(value)


# ---------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Registry:
    path: str
    flags: Mapping[str, Flag]  # read-only, in config.py order

    def __iter__(self) -> Iterator[Flag]:
        return iter(self.flags.values())

    def get(self, name: str) -> Flag:
        if name in self.flags:
            return self.flags[name]
        same_leaf = [n for n in self.flags if n.rsplit(".", 1)[-1] == name]
        close = same_leaf + difflib.get_close_matches(name, list(self.flags), n=3)
        close = list(dict.fromkeys(close))
        hint = f"; did you mean: {', '.join(close[:5])}?" if close else ""
        raise UnknownFlag(f"unknown Inductor flag {name!r}{hint}")

    def search(self, pattern: str) -> list[Flag]:
        """Case-insensitive substring match on name then doc, or a glob (``triton.*``) on names."""
        pat = pattern.lower()
        if any(c in pat for c in "*?["):
            return [f for f in self if fnmatch.fnmatchcase(f.name.lower(), pat)]
        by_name = [f for f in self if pat in f.name.lower()]
        return by_name + [f for f in self if pat not in f.name.lower() and pat in f.doc.lower()]

    def parse_value(self, name: str, text: str) -> Any:
        """Convert a command-line string to a value of the flag's type, or raise FlagValueError."""
        flag = self.get(name)
        spec = _TypeSpec.parse(flag.type)
        try:
            value = spec.convert(text)
        except ValueError:
            raise FlagValueError(f"{flag.name} expects {spec.describe()}, got {text!r}") from None
        _check_combination(flag, value)
        return value


_COMBINATIONS = re.compile(r"combinations of:\s*([\w ,]+)")


def _check_combination(flag: Flag, value: Any) -> None:
    """A flag whose doc says "Possible choices are combinations of: A, B, C" (as
    ``max_autotune_gemm_backends``) takes a comma-separated list of those names, in any case
    (Inductor upper-cases the value and strips each name)."""
    m = _COMBINATIONS.search(flag.doc)
    if not m or not isinstance(value, str):
        return
    allowed = [n.strip() for n in m.group(1).split(",") if n.strip()]
    wrong = [n.strip() for n in value.split(",")
             if n.strip().upper() not in {a.upper() for a in allowed}]
    if wrong:
        raise FlagValueError(f"{flag.name} takes a comma-separated combination of "
                             f"{', '.join(allowed)}; {', '.join(map(repr, wrong))} is not one "
                             f"(got {value!r})")


def default_config_path() -> Path:
    """The installed ``torch/_inductor/config.py``, located without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("torch is not installed in this environment")
    return Path(list(spec.submodule_search_locations)[0]) / "_inductor" / "config.py"


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int) -> Registry:
    flags = _ConfigParser(Path(path).read_text(encoding="utf-8")).parse()
    return Registry(path, MappingProxyType(flags))


def load_registry(config_path: str | Path | None = None) -> Registry:
    """Flags of the installed torch, or of ``config_path``; cached on path + mtime."""
    path = Path(config_path or default_config_path()).resolve()
    return _load(str(path), path.stat().st_mtime_ns)


@dataclass(frozen=True)
class InForce:
    """Flag values in a process with a given environment, before anything patches the config.

    ``defaults``: each default that reads the environment, evaluated with it. ``current``: the
    value of each flag that could be evaluated (a ``Config`` entry's environment override
    applied). A flag in neither could not be evaluated without running config.py (it reads
    ``torch.version``, the CPU count, …).
    """

    defaults: Mapping[str, Any]
    current: Mapping[str, Any]


@functools.lru_cache(maxsize=4)
def _load_in_force(path: str, mtime_ns: int, environ: tuple[tuple[str, str], ...]) -> InForce:
    static = _load(path, mtime_ns)
    parser = _ConfigParser(Path(path).read_text(encoding="utf-8"), environ=dict(environ))
    flags = parser.parse()
    current = dict(parser.current)
    for name, target in parser.aliases.items():  # an alias of another Inductor flag
        other = target.removeprefix("torch._inductor.config.")
        if other != target and other in current:
            current[name] = current[other]
    defaults = {n: f.default for n, f in flags.items()
                if f.default_known and n in static.flags and not static.flags[n].default_known}
    return InForce(MappingProxyType(defaults), MappingProxyType(current))


def values_in_force(environ: Mapping[str, str] | None = None,
                    config_path: str | Path | None = None) -> InForce:
    """The flags' values with ``environ`` (default: this process's environment), evaluated from
    config.py's source without importing torch or running its code (module docstring)."""
    import os

    path = Path(config_path or default_config_path()).resolve()
    env = tuple(sorted((os.environ if environ is None else environ).items()))
    return _load_in_force(str(path), path.stat().st_mtime_ns, env)


# ---------------------------------------------------------------------------- CLI


def flags_main(pattern: str | None, as_json: bool, console: Any = None) -> int:
    """Print flags matching ``pattern`` (all when None) as a table or JSON; 1 when none match."""
    from rich.console import Console
    from rich.text import Text

    console = console or Console()
    registry = load_registry()
    in_force = values_in_force()
    flags = registry.search(pattern) if pattern else list(registry)
    if not flags:
        close = difflib.get_close_matches(pattern or "", list(registry.flags), n=3)
        hint = f"; did you mean: {', '.join(close)}?" if close else ""
        console.print(Text(f"no Inductor flag matches {pattern!r}{hint}", style="red"))
        return 1
    if as_json:
        console.out(json.dumps([_flag_json(f, in_force) for f in flags], indent=2, default=repr),
                    highlight=False)
        return 0
    console.print(_flags_table(flags, in_force))
    if any(f.name not in in_force.current for f in flags):
        console.print(Text("current ?: not computable without importing torch (the default "
                           "reads torch.version, the CPU count, …)", style="dim"))
    return 0


def _flag_json(f: Flag, in_force: InForce) -> dict[str, Any]:
    return {**asdict(f), "default_in_env": in_force.defaults.get(f.name),
            "current": in_force.current.get(f.name), "current_known": f.name in in_force.current}


# column: (style, max width); the name folds, so that the doc column survives in 80 columns
_COLUMNS = (("name", "bold cyan", 36), ("type", "magenta", 18), ("default", "green", 30),
            ("current", "", 16), ("env", "yellow", 30))


def _flags_table(flags: list[Flag], in_force: InForce) -> Any:
    from rich.table import Table
    from rich.text import Text

    title = f"{len(flags)} Inductor flag{'s' if len(flags) > 1 else ''}"
    table = Table(title=title, title_justify="left")
    for column, style, width in _COLUMNS:
        table.add_column(column, style=style, overflow="fold", max_width=width)
    table.add_column("doc", ratio=1, min_width=10)
    for f in flags:
        table.add_row(Text(f.name), Text(f.type), _default_cell(f, in_force),
                      _current_cell(f, in_force), Text(", ".join(f.env)), Text(f.summary))
    return table


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _default_cell(f: Flag, in_force: InForce) -> Any:
    """The default; for one computed from the environment, its source and ``= value``."""
    from rich.text import Text

    if f.default_known:
        return Text(_short(repr(f.default)))
    cell = Text(_short(str(f.default_repr)), style="dim")
    if f.name in in_force.defaults:
        cell.append(f"\n= {_short(repr(in_force.defaults[f.name]))}", style="green")
    return cell


def _current_cell(f: Flag, in_force: InForce) -> Any:
    """The value in force in this process; bold yellow where the environment overrides the
    default."""
    from rich.text import Text

    if f.name not in in_force.current:
        return Text("?", style="dim")
    value = in_force.current[f.name]
    default = f.default if f.default_known else in_force.defaults.get(f.name, value)
    return Text(_short(repr(value), 40), style="bold yellow" if value != default else "")
