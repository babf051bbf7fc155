"""Dynamic shapes, as plain data: the symbolic-shape records of the structured trace log
(``create_symbol``, ``create_unbacked_symbol``, ``symbolic_shape_specialization``,
``guard_added_fast``, ``propagate_real_tensors``), the ShapeEnv of the compile being traced
(every symbol's final value range, hint and sources) and the values of a recompiled frame's
inputs that its failed guards name.

PyTorch records a user stack with each of those log records whenever the log has a handler
(capture installs one), so the user line of a guard or a specialization is known without
``TORCHDYNAMO_EXTENDED_DEBUG_*``.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Mapping

from tuidebug.compiler.compat.lookup import NotAvailable
from tuidebug.compiler.compat.wrapped import wrapped_of

# The log records capture reads, by the key torch gives them in the record's metadata.
SHAPE_RECORDS = ("create_symbol", "create_unbacked_symbol", "symbolic_shape_specialization",
                 "guard_added_fast", "propagate_real_tensors")

# Where Dynamo asks why a frame's cached compiles do not fit its new inputs (one call per
# recompile; its frame holds the inputs). Imported by name into convert_frame.
RECOMPILE_REASONS = "torch._dynamo.convert_frame.get_and_maybe_log_recompilation_reasons"


def _filename(index: Any) -> str | None:
    """A structured-log stack frame names its file by an index into torch's intern table."""
    if isinstance(index, str):
        return index
    try:
        from torch._logging import structured
    except ImportError:
        return None
    for name, i in structured.INTERN_TABLE.items():
        if i == index:
            return name
    return None


def _not_user() -> tuple[str, ...]:
    import os

    import torch

    import tuidebug

    return tuple(os.path.dirname(m.__file__ or "") + os.sep for m in (torch, tuidebug))


_NOT_USER = _not_user()


def user_line(stack: Any) -> dict[str, Any] | None:
    """The innermost frame of a structured-log ``user_stack``: ``{file, line, fn, code}``."""
    if not isinstance(stack, list):
        return None
    for frame in reversed(stack):  # the innermost frame of the user's own code
        if not isinstance(frame, dict):
            continue
        name = _filename(frame.get("filename"))
        if name is None or name.startswith("<") or any(p in name for p in _NOT_USER):
            continue
        return {"file": name, "line": frame.get("line"), "fn": frame.get("name"),
                "code": frame.get("loc")}
    return None


def _int(text: Any) -> Any:
    try:
        return int(str(text))
    except ValueError:
        return str(text)


def shape_record(record: logging.LogRecord) -> tuple[str, dict[str, Any]] | None:
    """What a structured-log record says about shapes: ``(kind, data)`` with kind one of
    ``SHAPE_RECORDS`` and data plain (symbol, source(s), value, range text, reason, expression,
    ``user_line``); None for every other record."""
    meta = getattr(record, "metadata", None)
    if not isinstance(meta, dict):
        return None
    for kind in SHAPE_RECORDS:
        body = meta.get(kind)
        if isinstance(body, dict):
            break
    else:
        return None
    data: dict[str, Any] = {"user_line": user_line(body.get("user_stack"))}
    if kind in ("create_symbol", "create_unbacked_symbol"):
        data.update(symbol=str(body.get("symbol")), range=str(body.get("vr") or ""),
                    source=body.get("source"),
                    hint=_int(body["val"]) if "val" in body else None)
    elif kind == "symbolic_shape_specialization":
        data.update(symbol=str(body.get("symbol")), value=_int(body.get("value")),
                    sources=[str(s) for s in body.get("sources") or []],
                    reason=body.get("reason"))
    else:  # guard_added_fast, propagate_real_tensors
        data.update(expr=str(body.get("expr")))
    return kind, data


def current_shape_env() -> Any:
    """The ShapeEnv of the compile this thread is tracing (None outside one). An opaque token:
    hand it to ``shape_env_symbols``."""
    try:
        from torch._guards import TracingContext
    except ImportError as e:
        raise NotAvailable("torch._guards.TracingContext") from e
    tc = TracingContext.try_get()
    mode = getattr(tc, "fake_mode", None) if tc is not None else None
    return getattr(mode, "shape_env", None)


def _bound(value: Any) -> int | str:
    text = str(value)
    return int(text) if re.fullmatch(r"-?\d+", text) else text  # "int_oo", "-int_oo", floats


def shape_env_symbols(env: Any) -> dict[str, dict[str, Any]]:
    """Per symbol of a ShapeEnv: its value range (``lower``, ``upper``; ``int_oo`` unbounded),
    the hint it was created with (None for an unbacked one), its sources, and the constant or
    expression it was replaced by (a specialization, or two sizes found equal)."""
    out: dict[str, dict[str, Any]] = {}
    if env is None:
        return out
    # backed_var_to_val: torch 2.13+ (var_to_val there is a property that warns, FutureWarning,
    # in the user's output); var_to_val before
    backed = getattr(env, "backed_var_to_val", None)
    hints = dict((backed if backed is not None else getattr(env, "var_to_val", {})) or {})
    hints.update(getattr(env, "unbacked_var_to_val", {}) or {})
    sources = getattr(env, "var_to_sources", {}) or {}
    replacements = getattr(env, "replacements", {}) or {}
    for sym, vr in list((getattr(env, "var_to_range", {}) or {}).items()):
        name = str(sym)
        hint = hints.get(sym)
        out[name] = {
            "lower": _bound(vr.lower), "upper": _bound(vr.upper),
            "hint": _bound(hint) if hint is not None else None,
            "sources": [s.name for s in sources.get(sym, [])],
            "replaced_by": str(replacements[sym]) if sym in replacements else None,
        }
    return out


_SIZE_SOURCE = re.compile(r"L\['([A-Za-z_][A-Za-z0-9_]*)'\]\.(size|stride)\(\)\[(\d+)\]")
_TENSOR_REASON = re.compile(r"tensor '([A-Za-z_][A-Za-z0-9_]*)' (size|stride) mismatch at index "
                            r"(\d+)")
_LOCAL = re.compile(r"L\['([A-Za-z_][A-Za-z0-9_]*)'\]")
# a local named bare, as torch 2.13 words a failed guard on a Python value: ``n == 2``,
# ``flag == True`` (after the compile id Dynamo puts first)
_BARE_LOCAL = re.compile(r"^(?:!?[\d/_]+: )?([A-Za-z_][A-Za-z0-9_]*) (?:==|!=|is) ", re.M)


def recompile_call(args: tuple[Any, ...], kwargs: Mapping[str, Any],
                   reasons: Any) -> dict[str, Any]:
    """RECOMPILE_REASONS(cache_entries, frame, backend, …) and the reasons it returned: the
    reasons, and the value now of each input size, stride or int they name (read from the
    frame's locals, never evaluated): ``{"L['x'].size()[0]": 3, "L['k']": 5}``."""
    frame = args[1] if len(args) > 1 else kwargs.get("frame")
    f_locals = getattr(frame, "f_locals", None) or {}
    texts = [str(r) for r in reasons or []]
    values: dict[str, Any] = {}
    for text in texts:
        for name, what, index in _SIZE_SOURCE.findall(text):
            values[f"L['{name}'].{what}()[{index}]"] = _tensor_dim(f_locals.get(name), what, index)
        for name, what, index in _TENSOR_REASON.findall(text):
            values[f"L['{name}'].{what}()[{index}]"] = _tensor_dim(f_locals.get(name), what, index)
        for name in _LOCAL.findall(text) + _BARE_LOCAL.findall(text):
            v = f_locals.get(name)
            if isinstance(v, (int, float, bool)) and f"L['{name}']" not in values:
                values[f"L['{name}']"] = v
    return {"reasons": texts, "values": {k: v for k, v in values.items() if v is not None},
            "called_at": called_at(frame), "wraps": wrapped_of(frame)}


# where the user's own code is not: torch, tuidebug, installed packages, Python's own modules
_NOT_OWN_CODE = ("/site-packages/", "/dist-packages/", "/lib/python")


def _passing_on() -> tuple[str, ...]:
    """The files of the frames between a user's call and the frame it runs that pass the
    call's arguments on unchanged: nn.Module's ``__call__``, torch.compile's wrappers (Dynamo's
    own frames, above the frame being compiled, too), DDP's and FSDP's forward, torch's
    decorators (``no_grad``, ``autocast``), and tuidebug's own (the capture's hooks)."""
    import os

    torch_dir, tuidebug_dir = _NOT_USER
    return (tuidebug_dir, *(torch_dir + p.replace("/", os.sep) for p in (
        "_dynamo/", "_compile.py", "nn/modules/module.py", "nn/parallel/distributed.py",
        "distributed/fsdp/", "utils/_contextlib.py", "amp/autocast_mode.py")))


_PASSING_ON = _passing_on()


def called_at(frame: Any) -> dict[str, Any] | None:
    """The line of the user's own code that called the frame Dynamo is compiling: the
    innermost frame of the user's on the stack now (Dynamo decides while the frame is about to
    run, its callers below), or the compiled frame's own ``f_back`` chain where the stack does
    not reach it: ``{file, line, fn, code, direct}``; None when no caller is the user's.
    ``direct``: only frames that pass the call on (``_PASSING_ON``: a module's ``__call__``,
    torch.compile's wrappers) stand between that line and the compiled frame — the frame is
    the one the line's call runs (``model(x)`` into the model's forward), not one a library
    called from inside (a submodule's forward, given what the library computed)."""
    import linecache
    import sys

    return _first_own(sys._getframe(1), linecache) or _first_own(
        getattr(frame, "f_back", None), linecache)


def _first_own(f: Any, linecache: Any) -> dict[str, Any] | None:
    direct = True
    for _ in range(400):
        if f is None:
            return None
        code = f.f_code
        name = code.co_filename.replace("\\", "/")
        if not (name.startswith("<") or any(p in name for p in _NOT_USER)
                or any(p in name for p in _NOT_OWN_CODE)):
            return {"file": code.co_filename, "line": f.f_lineno, "fn": code.co_name,
                    "code": linecache.getline(code.co_filename, f.f_lineno).strip() or None,
                    "direct": direct}
        direct = direct and any(code.co_filename.startswith(p) for p in _PASSING_ON)
        f = f.f_back
    return None


def _tensor_dim(t: Any, what: str, index: str) -> int | None:
    import torch

    if not isinstance(t, torch.Tensor):
        return None
    try:
        return int((t.size() if what == "size" else t.stride())[int(index)])
    except (IndexError, RuntimeError):
        return None
