"""Inductor config that comes from a trace: applied only when the registry vouches for it.

A trace's ``config.json`` and ``config_overrides`` are untrusted (docs/security.md): a crafted
one could set ``cpp.cxx`` to a program of its choosing, which Inductor then runs. ``check``
accepts a flag only when it is in the flag registry (``flags.load_registry``, read from this
torch's config.py) with a value of the registered type, and refuses flags that name a program, a
path, a module or a callable unless the user confirmed that flag by name (``allowed``): on the
terminal by typing its name (``consent.ask``), in the TUI's consent dialog, or with
``--allow-flag NAME``. ``split`` sorts a trace's config into what is applied, what waits for
that confirmation and what is left out; nothing refused stops a run, it is named instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

#: ``allowed[name] = ANY``: confirmed by name whatever the value (``--allow-flag NAME``)
ANY = object()
#: why a risky flag is not applied until the user confirms it by name
NEEDS_NAME = ("it names a program, path, module or callable; applied only when confirmed by "
              "name")

# last parts of flag names that name a program, a path, a module or a callable
_RISKY_NAME = re.compile(
    r"(^|[._])(cxx|cc|compiler|cmd|command|path|paths|dir|dirs|file|files|filename|module|"
    r"modules|hook|hooks|callable|fn|func|function|pass|passes|plugin|plugins|script|binary|"
    r"exe|executable|lib|libs|include|includes|linker|ld|ldflags|cflags|flags|cache_dir|"
    r"backend|class|factory|handler|callback|provider)($|[._])", re.IGNORECASE)
_RISKY_TYPE = re.compile(r"Callable|Path|Module|Type\[|type\[|CustomGraph|Pass|Any\b")


def risky(name: str, type_str: str = "") -> bool:
    """The flag names a program, path, module or callable (by its name or its type)."""
    return bool(_RISKY_NAME.search(name) or _RISKY_TYPE.search(type_str or ""))


def _type_ok(value: Any, type_str: str) -> bool:
    from tuidebug.compiler.flags import TypeSpec

    spec = TypeSpec.parse(type_str)
    if spec.choices and value in spec.choices and type(value) in {type(c) for c in spec.choices}:
        return True
    kinds = spec.kinds
    if value is None:
        return "none" in kinds
    if isinstance(value, bool):
        return "bool" in kinds
    if isinstance(value, int):
        return bool(kinds & {"int", "float"})
    if isinstance(value, float):
        return "float" in kinds
    if isinstance(value, str):
        return "str" in kinds
    if isinstance(value, (list, dict)):
        return "json" in kinds and spec.container in ("list", "tuple", "set", "dict") and \
            isinstance(value, dict if spec.container == "dict" else list)
    return False


def _confirmed(name: str, value: Any, allowed: Mapping[str, Any]) -> bool:
    """The user confirmed ``name`` (with this very value, when a value was confirmed)."""
    if name not in allowed:
        return False
    want = allowed[name]
    return want is ANY or (want == value and type(want) is type(value))


def check(flags: Mapping[str, Any], allowed: Iterable[str] | Mapping[str, Any] = (),
          registry: Any = None) -> tuple[dict[str, Any], dict[str, str]]:
    """(flags to apply, {refused flag: why}) for config values that come from a trace.
    ``allowed``: names the user confirmed (any value), or {name: the value confirmed}."""
    if registry is None:
        from tuidebug.compiler.flags import load_registry

        registry = load_registry()
    if not isinstance(allowed, Mapping):
        allowed = {n: ANY for n in allowed}
    ok: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for name, value in flags.items():
        flag = registry.flags.get(name) if isinstance(name, str) else None
        if flag is None:
            refused[str(name)] = "not an Inductor flag of this torch"
        elif not _type_ok(value, flag.type):
            refused[name] = f"value {value!r:.60} is not of its type ({flag.type})"
        elif risky(name, flag.type) and not _confirmed(name, value, allowed) and \
                not isinstance(value, (bool, int, float, type(None))):
            refused[name] = NEEDS_NAME
        else:
            ok[name] = value
    return ok, refused


@dataclass
class TraceConfig:
    """A trace's config sorted for running: ``apply`` (applied), ``confirm`` (risky flags that
    are applied only once the user confirms each by name: {name: value}), ``left_out``
    ({name: why}: not a registry flag, or a value of the wrong type)."""

    apply: dict[str, Any] = field(default_factory=dict)
    confirm: dict[str, Any] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)


def split(flags: Mapping[str, Any], allowed: Iterable[str] | Mapping[str, Any] = (),
          registry: Any = None) -> TraceConfig:
    """``check``, with the risky flags that the user may still confirm by name kept apart."""
    ok, refused = check(flags, allowed, registry)
    confirm = {n: flags[n] for n, why in refused.items() if why == NEEDS_NAME and n in flags}
    return TraceConfig(ok, confirm, {n: w for n, w in refused.items() if n not in confirm})


def describe(value: Any) -> str:
    """A config value from a trace as one short line (for the consent question)."""
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "…"
