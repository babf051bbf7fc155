"""The job a recompile worker runs, as one typed record (torch-free).

:class:`RecompileSpec` is built once (``recompile.recompile_spec`` for a trace,
``recompile.script_spec`` for a script), shown to the user (``consent.spec_plan``), completed
with the flags the user confirmed by name (:meth:`RecompileSpec.confirmed`) and handed — that
very object — to the worker, which sends :meth:`RecompileSpec.to_json` to its server; the job's
process reads it back with :meth:`RecompileSpec.from_json`, the one place a spec is validated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from tuidebug.errors import RecompileError
from tuidebug.trace.format.manifest import sane_runs, sane_tol

__all__ = ["RecompileSpec", "JobKind"]

JobKind = Literal["recompile", "trace"]
_KINDS = ("recompile", "trace")


@dataclass(frozen=True)
class RecompileSpec:
    """One job: re-run ``script`` with ``args`` in ``cwd`` under capture into ``out``, with the
    Inductor config ``overrides`` (the trace's, then the user's ``sets``).

    ``kind``: ``"recompile"`` (of ``source_trace``) or ``"trace"`` (a script, as ``tuidebug
    trace``). ``confirm``: the trace's risky flags not applied until the user confirms each by
    name; ``left_out``: its flags never applied ({name: why}). ``check``, ``accuracy_tol``,
    ``profile``: the eager check and profiling, as the original trace had them. ``use_cache``:
    let a ``--set`` of ``fx_graph_cache`` decide the graph-level caches. ``timeout``: seconds
    before the job is killed (the worker's default when None). ``env``: set in the job's process.
    """

    kind: JobKind
    script: str
    script_arg: str
    cwd: str
    out: str
    args: tuple[str, ...] = ()
    source_trace: str | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    sets: Mapping[str, Any] = field(default_factory=dict)
    confirm: Mapping[str, Any] = field(default_factory=dict)
    left_out: Mapping[str, str] = field(default_factory=dict)
    check: bool = True
    accuracy_tol: float | None = None
    profile: int = 0
    use_cache: bool = True
    timeout: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def confirmed(self, typed: Mapping[str, Any]) -> "RecompileSpec":
        """This spec with the flags of ``confirm`` that the user typed by name (``typed``:
        {name: the value shown}) applied; a value other than the one shown is not applied.
        A flag the user sets (``sets``) wins over the trace's."""
        ok = {n: v for n, v in self.confirm.items() if n not in self.sets
              and n in typed and typed[n] == v and type(typed[n]) is type(v)}
        if not ok:
            return self
        mine = {k: v for k, v in self.overrides.items() if k in self.sets}
        overrides = {**{k: v for k, v in self.overrides.items() if k not in mine}, **ok, **mine}
        return dataclasses.replace(
            self, overrides=overrides,
            confirm={n: v for n, v in self.confirm.items() if n not in ok})

    def with_timeout(self, timeout: float) -> "RecompileSpec":
        return dataclasses.replace(self, timeout=float(timeout))

    def to_json(self) -> dict[str, Any]:
        """The spec as the worker protocol carries it (JSON-shaped)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["args"] = list(self.args)
        for name in ("overrides", "sets", "confirm", "left_out", "env"):
            out[name] = dict(out[name])
        return out

    @classmethod
    def from_json(cls, data: Any) -> "RecompileSpec":
        """The spec in ``data`` (parsed JSON), validated; ``RecompileError`` saying what is
        wrong with it."""
        if not isinstance(data, Mapping):
            raise RecompileError(f"a job spec is an object, not {type(data).__name__}")
        kind = data.get("kind")
        if kind not in _KINDS:
            raise RecompileError(f"a job spec's kind is one of {', '.join(_KINDS)}, not {kind!r}")
        return cls(
            kind=kind, script=_text(data, "script"), script_arg=_text(data, "script_arg"),
            cwd=_text(data, "cwd"), out=_text(data, "out"),
            args=tuple(_texts(data, "args")),
            source_trace=_text(data, "source_trace") if data.get("source_trace") is not None
            else None,
            overrides=_object(data, "overrides"), sets=_object(data, "sets"),
            confirm=_object(data, "confirm"),
            left_out={k: str(v) for k, v in _object(data, "left_out").items()},
            check=_flag(data, "check", True), accuracy_tol=sane_tol(data.get("accuracy_tol")),
            profile=sane_runs(data.get("profile")) or 0,
            use_cache=_flag(data, "use_cache", True), timeout=_seconds(data.get("timeout")),
            env={k: str(v) for k, v in _object(data, "env").items()})


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise RecompileError(f"a job spec's {key} is a non-empty string, not {value!r:.80}")
    return value


def _texts(data: Mapping[str, Any], key: str) -> list[str]:
    value = data.get(key) or []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise RecompileError(f"a job spec's {key} is a list of strings, not {value!r:.80}")
    return list(value)


def _object(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise RecompileError(f"a job spec's {key} is an object, not {value!r:.80}")
    return dict(value)


def _flag(data: Mapping[str, Any], key: str, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise RecompileError(f"a job spec's {key} is true or false, not {value!r:.80}")
    return value


def _seconds(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise RecompileError(f"a job spec's timeout is a positive number, not {value!r:.80}")
    return float(value)
