"""What a flag is and what it accepts: :class:`Flag`, its type (:class:`TypeSpec`) and the
conversion of a command-line string to a value of that type."""

from __future__ import annotations

import ast
import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from tuidebug.compiler.flags.evaluator import dotted, str_const
from tuidebug.errors import FlagValueError


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



_TRUE, _FALSE = {"true", "1", "yes", "on", "y", "t"}, {"false", "0", "no", "off", "n", "f"}


def _subscript_args(node: ast.Subscript) -> list[ast.expr]:
    return node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]


def _union_parts(node: ast.expr) -> list[ast.expr]:
    """``A | B``, ``Optional[A]``, ``Union[A, B]`` and quoted annotations, flattened."""
    quoted = str_const(node)
    if quoted is not None:
        return _union_parts(ast.parse(quoted, mode="eval").body)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union_parts(node.left) + _union_parts(node.right)
    if isinstance(node, ast.Subscript) and dotted(node.value).endswith("Optional"):
        return _union_parts(node.slice) + [ast.Constant(None)]
    if isinstance(node, ast.Subscript) and dotted(node.value).endswith("Union"):
        return [p for e in _subscript_args(node) for p in _union_parts(e)]
    return [node]


@dataclass(frozen=True)
class TypeSpec:
    """What a flag's type accepts: some of bool/int/float/str/none/json/any, Literal choices."""

    type_str: str
    kinds: frozenset[str]
    choices: tuple[Any, ...] | None = None
    container: str | None = None  # list/tuple/set/dict, for JSON values

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def parse(type_str: str) -> TypeSpec:
        kinds: set[str] = set()
        choices: list[Any] = []
        container = None
        try:
            parts = _union_parts(ast.parse(type_str, mode="eval").body)
        except SyntaxError:
            parts = [ast.Name("Any")]
        for part in parts:
            sub = part if isinstance(part, ast.Subscript) else None
            head = dotted(sub.value if sub else part).rsplit(".", 1)[-1]
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
        return TypeSpec(type_str, frozenset(kinds), tuple(choices) or None, container)

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


_COMBINATIONS = re.compile(r"combinations of:\s*([\w ,]+)")


def check_combination(flag: Flag, value: Any) -> None:
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
