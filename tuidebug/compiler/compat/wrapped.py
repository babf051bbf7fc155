"""The function a compiled frame's code wraps, as plain data. A Hugging Face model's ``forward``
is wrapped by transformers' decorators (``can_return_tuple``, ``merge_with_config_defaults``,
``capture_outputs``, ``check_model_inputs``: ``functools.wraps`` wrappers), so Dynamo compiles
a frame named ``wrapper`` (``transformers/utils/generic.py``) whose ``*args`` are the model's
positional arguments: ``args[0]`` is ``input_ids``. Read from the live frame while Dynamo holds
it (the instance the frame was called on, its class's function that runs the frame's code and
closes over the frame's own free variables, and that function's ``__wrapped__`` chain; else the
one function the wrapper closes over), never by importing anything, and with no code of the
user's run: the class and its attributes are read as stored (no ``__getattr__``, descriptor or
metaclass is called), only plain functions are looked into."""

from __future__ import annotations

import dis
import inspect
import types
from typing import Any

_MAX_ATTRS = 5000  # attributes of a class looked through for the frame's own function
_MAX_CHAIN = 100  # __wrapped__ links followed
_MRO = type.__dict__["__mro__"]  # read through type's own slots: a metaclass's lookup not run
_CLASS_DICT = type.__dict__["__dict__"]
_FUNCTION_DICT = types.FunctionType.__dict__["__dict__"]
_EMPTY = object()


def _is_function(value: Any) -> bool:
    """A plain Python function (no subclass exists; no ``isinstance``, which asks an object
    that is not one for its ``__class__``)."""
    return type(value) is types.FunctionType


def _closes_over_frame(fn: Any, code: Any, f_locals: dict[str, Any]) -> bool:
    """Whether ``fn``'s closure cells hold the frame's free variables: every method one
    decorator wraps runs the same ``wrapper`` code, each closing over its own ``func``."""
    cells = fn.__closure__ or ()
    if len(cells) != len(code.co_freevars):
        return False
    for cell, name in zip(cells, code.co_freevars):
        try:
            held = cell.cell_contents
        except ValueError:  # an empty cell
            held = _EMPTY
        if held is not f_locals.get(name, _EMPTY):
            return False
    return True


def _own_function(code: Any, f_locals: dict[str, Any], args: Any) -> Any:
    """The function object whose code the frame runs: a method of the instance it was called
    on (its first named parameter, or the first of its ``*args``), found on its class by its
    code and the values it closes over; None where none, or several alike, are found."""
    first = (f_locals.get(code.co_varnames[0]) if code.co_argcount else
             args[0] if type(args) is tuple and args else None)
    if first is None:
        return None
    found: dict[int, Any] = {}
    for klass in _MRO.__get__(type(first)):
        names = _CLASS_DICT.__get__(klass)
        if len(names) > _MAX_ATTRS:
            continue
        for value in list(names.values()):
            if _is_function(value) and value.__code__ is code and \
                    _closes_over_frame(value, code, f_locals):
                found[id(value)] = value
    return next(iter(found.values())) if len(found) == 1 else None


def _star_callees(code: Any) -> set[str]:
    """The free variables ``code`` calls with its own ``*args`` or ``**kwargs`` spread
    (``func(*args, **kwargs)``, ``func(self, *args)``), read from its bytecode, nothing run:
    each ``CALL_FUNCTION_EX``'s operands are the instructions since the stack was last that
    low; its callable is the first of them that is no ``PUSH_NULL`` (after it on 3.13, before
    it on 3.11-3.12, absent on 3.10), and the star names must be loaded among them. Straight
    code is what a wrapper is; where the stack cannot be followed, none."""
    n, star = code.co_argcount + code.co_kwonlyargcount, set()
    for flag in (inspect.CO_VARARGS, inspect.CO_VARKEYWORDS):
        if code.co_flags & flag:
            star.add(code.co_varnames[n])
            n += 1
    try:
        ops = list(dis.get_instructions(code))
        depth, before = 0, []
        for op in ops:
            before.append(depth)
            depth += dis.stack_effect(op.opcode, op.arg if op.opcode >= dis.HAVE_ARGUMENT
                                      else None, jump=False)
    except (ValueError, TypeError):
        return set()
    callees: set[str] = set()
    for i, op in enumerate(ops):
        if op.opname != "CALL_FUNCTION_EX":
            continue
        base = before[i] - (1 - dis.stack_effect(op.opcode, op.arg, jump=False))
        k = i
        while k > 0 and before[k - 1] > base:
            k -= 1
        k -= 1  # the first operand's push starts at depth ``base``
        operands = ops[max(k, 0):i]
        callee = next((o for o in operands if o.opname != "PUSH_NULL"), None)
        loaded = {name for o in operands if o.opname.startswith("LOAD_FAST")  # 3.13: pairs
                  for name in (o.argval if isinstance(o.argval, tuple) else (o.argval,))}
        if callee is not None and callee.opname == "LOAD_DEREF" and loaded & star:
            callees.add(callee.argval)
    return callees


def _closed_over(code: Any, f_locals: dict[str, Any]) -> Any:
    """The one function a wrapper closes over and passes its ``*args`` / ``**kwargs`` on to
    (``func`` of ``def wrapper(*args, **kwargs): return func(*args, **kwargs)``); None where
    it passes them to none or several (a compiled ``step(*batch)`` that calls the
    ``loss_fn`` it closes over with arguments of its own wraps nothing)."""
    callees = _star_callees(code)
    found = [v for n in code.co_freevars
             if n in callees and _is_function(v := f_locals.get(n))]
    return found[0] if len(found) == 1 else None


def _wrapped(fn: Any) -> Any:
    """The function ``fn``'s ``__wrapped__`` names (``functools.wraps``), read from its own
    ``__dict__``; ``fn`` itself where it names none; None where it names something other
    than a function or a bound method's."""
    # dict's own get: a dict subclass set as the function's __dict__ has its get not called
    link = dict.get(_FUNCTION_DICT.__get__(fn), "__wrapped__", _EMPTY)
    if link is _EMPTY:
        return fn
    if type(link) is types.MethodType:
        link = link.__func__
    return link if _is_function(link) else None


def _unwrap(fn: Any) -> Any:
    """The innermost function of ``fn``'s ``__wrapped__`` chain; None where the chain ends in
    something that is no function, loops, or is longer than ``_MAX_CHAIN``."""
    for _ in range(_MAX_CHAIN):
        inner = _wrapped(fn)
        if inner is fn or inner is None:
            return inner
        fn = inner
    return None


def wrapped_of(frame: Any) -> dict[str, Any] | None:
    """``_wrapped_of``, never raising: whatever it meets in the user's objects must not cost
    the recompile's record (its reasons, values and call site) this is part of."""
    try:
        return _wrapped_of(frame)
    except Exception:  # noqa: BLE001 (the user's objects, looked at: anything may raise)
        return None


def _wrapped_of(frame: Any) -> dict[str, Any] | None:
    """What the compiled ``frame`` wraps: ``{file, line, fn, qualname, args, passed_from}`` of
    the innermost function its ``__wrapped__`` chain names (``args``: that function's
    parameters as the frame's ``*args`` holds them; ``passed_from``: the index there of the
    caller's first positional argument, 1 where ``*args`` holds the instance first); None where
    the frame's code is no wrapper of another function. Only a frame whose code takes
    ``*args`` or ``**kwargs`` is looked into (a wrapper passing its arguments on)."""
    code = getattr(frame, "f_code", None)
    if type(code) is not types.CodeType or \
            not code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
        return None
    f_locals = getattr(frame, "f_locals", None)
    if not isinstance(f_locals, dict):  # Dynamo's frame: a dict of its own
        return None
    varargs = bool(code.co_flags & inspect.CO_VARARGS)
    star = (f_locals.get(code.co_varnames[code.co_argcount + code.co_kwonlyargcount])
            if varargs else None)
    own = _own_function(code, f_locals, star)
    # the instance's own method: its __wrapped__ chain; else (no such method, or one that
    # names nothing wrapped) only the function the frame hands its *args on to
    start = own if own is not None and _wrapped(own) is not own else \
        _closed_over(code, f_locals)
    inner = _unwrap(start) if start is not None else None
    if inner is None or inner.__code__ is code:
        return None
    inner_code = inner.__code__
    params = list(inner_code.co_varnames[:inner_code.co_argcount])
    named = code.co_argcount  # the wrapper's own parameters before *args (self)
    args = params[named:] if varargs else []
    # a wrapper(*args) found on the instance's class: *args holds the instance first (whatever
    # the method calls its first parameter), the caller's arguments after
    passed_from = 1 if varargs and not named and own is not None else 0
    qualname = inner.__qualname__  # a str subclass's __str__ is not called
    return {"file": inner_code.co_filename, "line": inner_code.co_firstlineno,
            "fn": inner_code.co_name, "qualname": qualname if type(qualname) is str else "",
            "args": args, "passed_from": passed_from}
