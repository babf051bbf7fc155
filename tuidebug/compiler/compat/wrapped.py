"""The function a compiled frame's code wraps, as plain data. A Hugging Face model's ``forward``
is wrapped by transformers' decorators (``can_return_tuple``, ``merge_with_config_defaults``,
``capture_outputs``, ``check_model_inputs``: ``functools.wraps`` wrappers), so Dynamo compiles
a frame named ``wrapper`` (``transformers/utils/generic.py``) whose ``*args`` are the model's
positional arguments: ``args[0]`` is ``input_ids``. Read from the live frame while Dynamo holds
it (the instance the frame was called on, its class's attribute whose code the frame runs, and
that function's ``__wrapped__`` chain; else the one function the wrapper closes over), never by
importing anything."""

from __future__ import annotations

import inspect
from typing import Any

_MAX_ATTRS = 5000  # attributes of a class looked through for the frame's own function


def _own_function(code: Any, f_locals: Any, args: Any) -> Any:
    """The function object whose code the frame runs: a method of the instance it was called
    on (its first named parameter, or the first of its ``*args``), found on its class."""
    first = (f_locals.get(code.co_varnames[0]) if code.co_argcount else
             args[0] if isinstance(args, tuple) and args else None)
    if first is None:
        return None
    for klass in type(first).__mro__:
        names = getattr(klass, "__dict__", {})
        if len(names) > _MAX_ATTRS:
            continue
        for value in list(names.values()):
            if getattr(value, "__code__", None) is code:
                return value
    return None


def _closed_over(code: Any, f_locals: Any) -> Any:
    """The one function a wrapper closes over (``func`` of ``def wrapper(*args, **kwargs):
    return func(*args, **kwargs)``), None where it closes over none or several."""
    found = [v for n in code.co_freevars if inspect.isfunction(v := f_locals.get(n))]
    return found[0] if len(found) == 1 else None


def wrapped_of(frame: Any) -> dict[str, Any] | None:
    """``_wrapped_of``, never raising: an object of the user's whose attribute lookup raises
    must not cost the recompile's record (its reasons, values and call site) this is part of."""
    try:
        return _wrapped_of(frame)
    except Exception:  # noqa: BLE001 (the user's objects, looked at: anything may raise)
        return None


def _wrapped_of(frame: Any) -> dict[str, Any] | None:
    """What the compiled ``frame`` wraps: ``{file, line, fn, qualname, args, passed_from}`` of
    the innermost function its ``__wrapped__`` chain names (``args``: that function's
    parameters as the frame's ``*args`` holds them; ``passed_from``: the index there of the
    caller's first positional argument, 1 where ``*args`` holds the instance first); None where
    the frame's code is no wrapper of another function."""
    code = getattr(frame, "f_code", None)
    f_locals = getattr(frame, "f_locals", None)
    if code is None or not isinstance(f_locals, dict):
        return None
    varargs = bool(code.co_flags & inspect.CO_VARARGS)
    star = (f_locals.get(code.co_varnames[code.co_argcount + code.co_kwonlyargcount])
            if varargs else None)
    own = _own_function(code, f_locals, star)
    start = own if own is not None and hasattr(own, "__wrapped__") else \
        _closed_over(code, f_locals) if varargs or code.co_flags & inspect.CO_VARKEYWORDS \
        else None
    if start is None:
        return None
    try:
        inner = inspect.unwrap(start)
    except ValueError:  # a cycle of __wrapped__
        return None
    inner_code = getattr(inner, "__code__", None)
    if inner_code is None or inner_code is code:
        return None
    params = list(inner_code.co_varnames[:inner_code.co_argcount])
    named = code.co_argcount  # the wrapper's own parameters before *args (self)
    args = params[named:] if varargs else []
    # a wrapper(*args) of a method: *args holds the instance first, the caller's arguments after
    passed_from = 1 if varargs and not named and params[:1] == ["self"] else 0
    return {"file": inner_code.co_filename, "line": inner_code.co_firstlineno,
            "fn": inner_code.co_name, "qualname": str(getattr(inner, "__qualname__", "")),
            "args": args, "passed_from": passed_from}
