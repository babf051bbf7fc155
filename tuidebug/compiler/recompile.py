"""Recompile what a trace captured under changed Inductor flags.

Two halves:

* torch-free (the TUI and the CLI use these): :func:`parse_sets` validates ``NAME=VALUE`` against
  the flag registry, :func:`trace_source` reads what produced a trace from its manifest,
  :func:`default_out` picks the new trace's directory beside the original, :func:`recompile_spec`
  and :func:`script_spec` build the job a :class:`~tuidebug.compiler.worker.RecompileWorker` runs.
* :func:`run_job` runs one job: it is called in a child process forked from the warm worker (torch
  and Inductor already imported) and runs the traced script again with capture on, the original
  trace's config overrides plus the new ones.

A recompile never touches the original trace: it writes a new trace directory, by default
``<trace>-<flag>=<value>`` beside it. It captures with the capture's cache policy
(``compat.CACHES_OFF``, as ``tuidebug trace`` does): Inductor's kernel code cache stays on, so
kernels whose code did not change are not compiled again (their compiled ``.so``/Triton binaries
are reused), while the graph-level caches are off — the FX graph cache and the AOTAutograd cache,
because a whole-graph hit would skip the passes, IR and fusion decisions the trace is for (and,
with Inductor's pre-grad passes run after the cache lookup, the trace's ``config.json``, written
when they start), and Dynamo's local PGO profile, which persists "this dim was dynamic last time"
across processes and would make a recompile trace different graphs. With ``use_cache`` (the
default) a ``--set`` of ``fx_graph_cache`` decides that cache and the AOTAutograd cache layered on
it (``compat.caches_off``); with ``use_cache=False`` (``--no-cache``) they all stay off and such a
``--set`` only changes the flag, as in ``tuidebug trace --set``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from tuidebug.errors import RecompileError, TraceError
from tuidebug.compiler import trace_config
from tuidebug.compiler.recompile_spec import RecompileSpec
from tuidebug.trace.format import manifest as format_manifest
from tuidebug.trace.format.manifest import Manifest

__all__ = ["RecompileError", "RecompileSpec", "parse_sets", "format_sets", "trace_source",
           "default_out", "recompile_spec", "script_spec", "run_job"]


# -- validation (torch-free) ---------------------------------------------------------------------

def parse_sets(items: Iterable[str] | Mapping[str, Any] | None,
               registry: Any = None) -> dict[str, Any]:
    """Validate ``NAME=VALUE`` strings (or a ``{name: value}`` mapping) against the registry.

    Values are converted to the flag's type (``"1"`` → ``1``, ``"false"`` → ``False``, JSON for
    containers). Raises :class:`~tuidebug.compiler.flags.UnknownFlag` (with close names) or
    :class:`~tuidebug.compiler.flags.FlagValueError` (saying what is allowed), or
    :class:`RecompileError` for an item without ``=``.
    """
    from tuidebug.compiler.flags import load_registry

    registry = registry or load_registry()
    out: dict[str, Any] = {}
    if items is None:
        return out
    pairs: list[tuple[str, Any, bool]] = []
    if isinstance(items, Mapping):
        pairs = [(str(k), v, isinstance(v, str)) for k, v in items.items()]
    else:
        for item in items:
            name, eq, text = str(item).partition("=")
            if not eq or not name.strip():
                raise RecompileError(f"--set takes NAME=VALUE, got {item!r}")
            pairs.append((name.strip(), text, True))
    for name, value, is_text in pairs:
        flag = registry.get(name)  # UnknownFlag, with suggestions
        if is_text:
            value = registry.parse_value(flag.name, value)  # FlagValueError, saying what is allowed
        out[flag.name] = _jsonable(value)
    return out


def _jsonable(v: Any) -> Any:
    if isinstance(v, (tuple, set, frozenset)):
        return [_jsonable(x) for x in v]
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return v


def format_sets(sets: Mapping[str, Any]) -> str:
    """``max_fusion_size=1,size_asserts=false``: for directory names and messages."""
    return ",".join(f"{k}={_value_text(v)}" for k, v in sets.items())


def _value_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


# -- what produced a trace (torch-free) -----------------------------------------------------------

def read_manifest(trace: str | os.PathLike[str]) -> Manifest:
    """The trace's manifest (``RecompileError`` when it cannot be read)."""
    try:
        return format_manifest.read_manifest(Path(trace))
    except TraceError as e:
        raise RecompileError(str(e)) from None


def trace_source(trace: str | os.PathLike[str],
                 allowed: Iterable[str] | Mapping[str, Any] = ()) -> dict[str, Any]:
    """What to re-run for ``trace``: ``{"script", "script_arg", "args", "cwd", "overrides",
    "confirm", "left_out", "check", "accuracy_tol", "profile"}`` from its manifest. ``script`` is absolute; ``script_arg``
    as it was typed. Config overrides that name a program, path, module or callable are applied
    only when ``allowed`` (confirmed by name, ``trace_config.check``); until then they are in
    ``confirm``, and what is never applied from a trace is in ``left_out`` ({name: why})."""
    m = read_manifest(trace)
    imported = m.imported_from
    if imported is not None:  # a TORCH_TRACE log or debug folder: no script recorded
        source = {"torch_trace": "a TORCH_TRACE log",
                  "torch_compile_debug": "a torch_compile_debug folder"}
        raise RecompileError(
            f"{trace} was imported from {source.get(str(imported.get('kind')), 'a log')}, "
            "which does not record the script that ran; recompile needs a trace made by "
            "`tuidebug trace SCRIPT`")
    command = m.command
    if command is None:
        raise RecompileError(f"{trace}: the manifest has no command to re-run")
    if len(command) >= 3 and Path(command[0]).name == "tuidebug" and command[1] == "trace":
        script_arg, args = command[2], command[3:]
    elif command and command[0].endswith(".py"):  # tuidebug.capture() inside a script
        script_arg, args = command[0], command[1:]
    else:
        raise RecompileError(
            f"{trace}: cannot tell which script produced this trace (command {command!r}); "
            "recompile needs a trace made by `tuidebug trace SCRIPT`")
    cwd = m.cwd or os.getcwd()
    script = Path(script_arg) if Path(script_arg).is_absolute() else Path(cwd) / script_arg
    if not script.is_file():
        raise RecompileError(f"{trace}: the traced script {script} no longer exists")
    if not Path(cwd).is_dir():
        raise RecompileError(f"{trace}: its working directory {cwd} no longer exists")
    # a trace's config: only what the registry vouches for, risky flags only when confirmed
    config = trace_config.split(m.config_overrides, allowed)
    return {"script": str(script), "script_arg": script_arg, "args": list(args), "cwd": cwd,
            "overrides": dict(config.apply), "confirm": config.confirm,
            "left_out": config.left_out, "check": m.check_accuracy,
            "accuracy_tol": m.accuracy_tol, "profile": m.profile_runs or 0}


_UNSAFE = re.compile(r"[^A-Za-z0-9_.,=+\-]+")


def default_out(trace: str | os.PathLike[str], sets: Mapping[str, Any]) -> Path:
    """``<trace>-<flag>=<value>[,…]`` beside the trace; ``-2``, ``-3``… when that exists."""
    trace = Path(trace)
    label = _UNSAFE.sub("_", format_sets(sets))[:120] or "recompile"
    base = trace.parent / f"{trace.name}-{label}"
    out, n = base, 1
    while out.exists() and (not out.is_dir() or any(out.iterdir())):
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def _check_out(out: Path, trace: Path | None = None) -> Path:
    out = Path(out)
    if trace is not None and out.resolve() == Path(trace).resolve():
        raise RecompileError("the output must not be the original trace (it is never modified)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RecompileError(f"output directory {out} is not empty; choose another with -o")
    return out


def recompile_spec(trace: str | os.PathLike[str], sets: Mapping[str, Any],
                   out: str | os.PathLike[str] | None = None, *, use_cache: bool = True,
                   timeout: float | None = None, env: Mapping[str, str] | None = None,
                   allowed: Iterable[str] | Mapping[str, Any] = ()) -> RecompileSpec:
    """The job that recompiles ``trace`` with ``sets`` (already validated) into ``out``;
    ``allowed``: the trace's risky flags the user confirmed by name (``trace_source``)."""
    trace = Path(trace)
    src = trace_source(trace, allowed)
    out = _check_out(Path(out) if out else default_out(trace, sets), trace)
    return RecompileSpec(
        kind="recompile", source_trace=str(trace.resolve()), script=src["script"],
        script_arg=src["script_arg"], args=tuple(src["args"]), cwd=src["cwd"],
        overrides={**src["overrides"], **dict(sets)}, sets=dict(sets),
        # a flag the user sets with --set needs no confirmation of the trace's value
        confirm={n: v for n, v in src["confirm"].items() if n not in sets},
        left_out={n: w for n, w in src["left_out"].items() if n not in sets},
        check=src["check"], accuracy_tol=src["accuracy_tol"], profile=src["profile"],
        out=str(Path(out).resolve()), use_cache=use_cache, timeout=timeout, env=dict(env or {}))


def script_spec(script: str | os.PathLike[str], args: Iterable[str] = (),
                sets: Mapping[str, Any] | None = None, out: str | os.PathLike[str] = "",
                *, cwd: str | None = None, check: bool = True, use_cache: bool = True,
                timeout: float | None = None,
                env: Mapping[str, str] | None = None) -> RecompileSpec:
    """A job that traces ``script`` (like ``tuidebug trace``) with ``sets``, in the worker."""
    path = Path(script)
    if not path.is_file():
        raise RecompileError(f"no such script: {script}")
    if not out:
        raise RecompileError("a script job needs an output directory")
    out = _check_out(Path(out))
    return RecompileSpec(
        kind="trace", source_trace=None, script=str(path.resolve()), script_arg=str(script),
        args=tuple(args), cwd=cwd or os.getcwd(), overrides=dict(sets or {}),
        sets=dict(sets or {}), check=check, out=str(Path(out).resolve()), use_cache=use_cache,
        timeout=timeout, env=dict(env or {}))


# -- the job itself (runs in the forked child; imports torch) -------------------------------------

def run_job(spec: RecompileSpec, emit: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Run one job in this process (a fresh child of the worker). Returns the exit code of
    ``tuidebug.compiler.run_script`` (0 ok, 10 compile failed, 11–15 script or write problems).

    ``emit`` receives ``{"event": "progress", "message"}`` and ``{"event": "phase", "phase",
    "graph"}`` messages as the capture proceeds. ``spec.env`` is applied to ``os.environ``
    first (e.g. ``TORCHINDUCTOR_CACHE_DIR``, ``TORCH_LOGS``).
    """
    from tuidebug.compiler import run_script as rs
    from tuidebug.compiler.capture import CaptureSession

    def send(msg: dict[str, Any]) -> None:
        if emit is not None:
            try:
                emit(msg)
            except Exception:
                pass

    os.environ.update(spec.env)
    os.chdir(spec.cwd)
    overrides = dict(spec.overrides)

    # The graph-level caches are off whatever ``use_cache`` says (the capture records which, in
    # the manifest's tuidebug_config): a hit would skip what the trace records (module docstring).
    session = CaptureSession(
        spec.out, check_accuracy=spec.check, use_cache=False, accuracy_tol=spec.accuracy_tol,
        # a recompile of a profiled trace is profiled the same way, so their times compare
        profile_runs=spec.profile,
        command=["tuidebug", "trace", spec.script_arg, *spec.args],
        on_progress=lambda m: send({"event": "progress", "message": m}),
        user_sets=overrides if spec.use_cache else None)
    send({"event": "phase", "phase": "starting", "graph": None})
    session.start()
    writer = session.writer
    assert writer is not None
    writer.on_phase = lambda phase, graph_id: send({"event": "phase", "phase": phase,
                                                    "graph": graph_id})
    writer.update(recompile={"from": spec.source_trace, "sets": dict(spec.sets),
                             "use_cache": spec.use_cache, "worker_pid": os.getppid()})
    return rs.run_in_session(session, spec.script, list(spec.args), overrides)
