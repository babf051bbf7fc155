"""Inductor's ``config.py`` read as source: every flag with its type, default, environment
variables and documentation, following ``torch.utils._config_module.install_config_module``
(public module-level values, ``Config(...)`` entries, nested classes, ``@inherit_fields_from``).

Defaults are computed by :mod:`~tuidebug.compiler.flags.evaluator` only; the build is taken to be
OSS (``is_fbcode()`` is False).
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
from dataclasses import replace
from typing import Any, Mapping

from tuidebug.compiler.flags.evaluator import (ENV_READERS, UNKNOWN, Evaluator, Scope, Unknown,
                                               dotted, jsonable, str_const)
from tuidebug.compiler.flags.values import Flag, TypeSpec

_LINT_COMMENT = re.compile(r"^(type|pyrefly|pyre-\w+|noqa|fmt|mypy|ruff|pylint|isort)\b")


def _union(types: list[str]) -> str:
    parts = list(dict.fromkeys(p for t in types for p in t.split(" | ")))
    return "Any" if "Any" in parts else " | ".join(sorted(parts, key=lambda p: p == "None"))


class ConfigParser(Evaluator):
    """The flags defined by a config.py source. ``environ``: evaluate what reads the environment
    with it (see :func:`~tuidebug.compiler.flags.values_in_force`); None (the registry) reads
    nothing."""

    def __init__(self, source: str, environ: Mapping[str, str] | None = None) -> None:
        super().__init__(environ)
        self.lines = source.splitlines()
        self.comments: dict[int, tuple[int, str]] = {}  # row -> (column, text after '#')
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                self.comments[tok.start[0]] = (tok.start[1], tok.string.lstrip("#").strip())
        self.tree = ast.parse(source)
        self.non_values: set[str] = set()  # names bound to imports, functions and classes
        self.classes: dict[str, dict[str, Flag]] = {}  # "cpp." -> {"simdlen": Flag}
        self.flags: dict[str, Flag] = {}
        self.anchor: ast.stmt | None = None  # the `if`/`try` holding the current statement
        self.in_try = 0  # inside a `try`, defaults are not computed
        self.current: dict[str, Any] = {}  # with environ: the value in force, where known
        self.aliases: dict[str, str] = {}  # flag -> the dotted name it aliases

    def parse(self) -> dict[str, Flag]:
        self._walk(self.tree.body, "", self.module)
        return self.flags

    def _walk(self, body: list[ast.stmt], prefix: str, scope: Scope) -> None:
        for stmt, nxt in zip(body, [*body[1:], None]):
            if isinstance(stmt, ast.If):  # `if is_fbcode(): ... else: ...`, `if TYPE_CHECKING:`
                try:
                    branches = [stmt.body if self._eval(stmt.test, scope) else stmt.orelse]
                except Exception:  # Unknown, or a TypeError from comparing odd values
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
        self._walk(cls.body, inner, Scope(parent=self.module))  # not the enclosing class's names
        own = {n[len(inner):]: f for n, f in self.flags.items()
               if n not in before and n.count(".") == inner.count(".")}
        for deco in cls.decorator_list:  # @inherit_fields_from(parent) copies fields not overridden
            if isinstance(deco, ast.Call) and dotted(deco.func).endswith("inherit_fields_from"):
                base = dotted(deco.args[0]) if deco.args else ""
                for key, flag in self.classes.get(f"{prefix}{base}.", {}).items():
                    if key not in own:
                        own[key] = self.flags[inner + key] = replace(flag, name=inner + key)
                        if flag.name in self.current:
                            self.current[inner + key] = self.current[flag.name]
        self.classes[inner] = own

    def _entry(self, name: str, ann: ast.expr | None, stmt: ast.Assign | ast.AnnAssign,
               nxt: ast.stmt | None, prefix: str, scope: Scope) -> None:
        value = stmt.value
        if value is None or isinstance(value, ast.Name) and value.id in self.non_values:
            return  # a function, class or module: install_config_module skips those
        node: ast.expr | None = value
        env: list[str] = []
        config_env: dict[str, list[str]] = {}
        alias = default_repr = None
        if isinstance(value, ast.Call) and dotted(value.func).rsplit(".", 1)[-1] == "Config":
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
                    raise Unknown
                default = jsonable(self._eval(node, scope))
            except Exception:  # Unknown, or e.g. a TypeError from `"a" + 1`
                default_repr = self._source(node) + ("  # in a try block" if self.in_try else "")
        known = node is not None and default_repr is None
        if ann is not None:
            type_str = str_const(ann) or ast.unparse(ann)
        elif known and default is not None:
            type_str = type(default).__name__
        else:
            type_str = self._infer(node, scope) if node is not None else "Any"
            type_str = "Any" if type_str == "None" else type_str
        scope.exprs[name], scope.types[name] = value, type_str
        scope.values[name] = default if known else UNKNOWN
        if name.startswith("_"):
            return
        if self.environ is not None:
            current = _in_force(self.environ, config_env, default if known else UNKNOWN)
            if current is not UNKNOWN:
                self.current[prefix + name] = current
        decl = scope.declared.get(name, stmt)
        doc = self._comments_for(decl) or self._comments_for(stmt)
        if not doc and self.anchor is not None:
            doc = self._comments_for(self.anchor, trailing=False)
        docstring = str_const(nxt.value) if isinstance(nxt, ast.Expr) else None
        if docstring is not None:  # a string literal right after the assignment
            doc = "\n".join(p for p in (doc, inspect.cleandoc(docstring)) if p)
        self.flags[prefix + name] = Flag(
            prefix + name, type_str, default, default_repr, tuple(dict.fromkeys(env)),
            TypeSpec.parse(type_str).choices, doc, decl.lineno)

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

    def _env(self, node: ast.AST, scope: Scope, bind: dict[str, str],
             seen: frozenset[str]) -> list[str]:
        """Environment variables read by an expression, following module helpers and names.

        ``bind`` maps parameters of the helper being walked to constant string arguments."""

        def arg(a: ast.expr) -> list[str]:
            name = str_const(a) or (bind.get(a.id) if isinstance(a, ast.Name) else None)
            return [name] if name else []

        out: list[str] = []
        for sub in ast.walk(node):
            fn = dotted(sub.func) if isinstance(sub, ast.Call) else ""
            if isinstance(sub, ast.Call) and fn in ENV_READERS and sub.args:
                out += arg(sub.args[0])
            elif isinstance(sub, ast.Call) and fn in self.funcs and fn not in seen:
                func = self.funcs[fn]
                args = dict(zip((p.arg for p in func.args.args), sub.args))
                args.update({k.arg: k.value for k in sub.keywords if k.arg})
                consts = {p: s for p, a in args.items() if (s := str_const(a)) is not None}
                out += self._env(func, self.module, consts, seen | {fn})
            elif isinstance(sub, ast.Subscript) and dotted(sub.value) == "os.environ":
                out += arg(sub.slice)
            elif isinstance(sub, ast.Compare) and dotted(sub.comparators[0]) == "os.environ":
                out += arg(sub.left)
            elif isinstance(sub, ast.Name) and sub.id not in seen and scope.lookup("exprs", sub.id):
                out += self._env(scope.lookup("exprs", sub.id), scope, {}, seen | {sub.id})
        return out

    def _infer(self, node: ast.expr, scope: Scope) -> str:
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

    def _infer_call(self, node: ast.Call, scope: Scope) -> str:
        fn, args = dotted(node.func), node.args
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

