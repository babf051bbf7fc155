"""The flag registry of the installed torch (or of any config.py), and the values in force with
an environment; both cached on the file's path and modification time."""

from __future__ import annotations

import difflib
import fnmatch
import functools
import importlib.util
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterator, Mapping

from tuidebug.compiler.flags.config_parser import ConfigParser
from tuidebug.compiler.flags.values import Flag, TypeSpec, check_combination
from tuidebug.errors import FlagValueError, UnknownFlag


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
        close = same_leaf + self.similar(name)
        close = list(dict.fromkeys(close))
        hint = f"; did you mean: {', '.join(close[:5])}?" if close else ""
        raise UnknownFlag(f"unknown Inductor flag {name!r}{hint}")

    def similar(self, name: str, n: int = 3) -> list[str]:
        """Up to ``n`` flag names close to ``name`` (for "did you mean")."""
        return difflib.get_close_matches(name, list(self.flags), n=n)

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
        spec = TypeSpec.parse(flag.type)
        try:
            value = spec.convert(text)
        except ValueError:
            raise FlagValueError(f"{flag.name} expects {spec.describe()}, got {text!r}") from None
        check_combination(flag, value)
        return value


def default_config_path() -> Path:
    """The installed ``torch/_inductor/config.py``, located without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("torch is not installed in this environment")
    return Path(list(spec.submodule_search_locations)[0]) / "_inductor" / "config.py"


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int) -> Registry:
    flags = ConfigParser(Path(path).read_text(encoding="utf-8")).parse()
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
    parser = ConfigParser(Path(path).read_text(encoding="utf-8"), environ=dict(environ))
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


def flag_json(f: Flag, in_force: InForce) -> dict[str, Any]:
    """A flag as ``tuidebug flags --json`` prints it: its fields, its default with this
    environment and its current value (``current_known``: whether it could be evaluated)."""
    return {**asdict(f), "default_in_env": in_force.defaults.get(f.name),
            "current": in_force.current.get(f.name), "current_known": f.name in in_force.current}
