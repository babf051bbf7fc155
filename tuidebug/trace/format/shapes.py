"""The documented shape of each JSON file of a trace (docs/trace-format.md), checked on read.

``check(kind, data, report)`` returns ``data`` with every field of the wrong type removed (an
item of a list whose required field is wrong is dropped) and calls ``report(message)`` once per
field, naming it — so that the code reading a trace can rely on the types below and the rest of
a damaged file still opens. Fields not listed are not checked (later versions may add some).

A shape is a type or a tuple of types (``NUM``, ``OPT`` …), a dict ``{field: shape}`` for an
object (a field name starting with ``!`` is required), or a one-item list ``[shape]`` for a list
whose items all have that shape.
"""

from __future__ import annotations

from typing import Any, Callable

NONE = type(None)
NUM = (int, float)
OPT_NUM = (int, float, NONE)
OPT_STR = (str, NONE)
OPT_INT = (int, NONE)
OPT_DICT = (dict, NONE)
OPT_LIST = (list, NONE)
ID = (str,)  # ids are strings; a number where an id is expected is reported

_RUN = {"wall_s": OPT_NUM, "wall_min_s": OPT_NUM, "wall_p10_s": OPT_NUM, "wall_p90_s": OPT_NUM,
        "wall_n": OPT_INT, "profiled_wall_s": OPT_NUM, "peak_memory_bytes": OPT_INT}
# profile.json: a kernel call, a kernel the device ran, an FX node of the eager graph
_KERNEL_CALL = {"!graph": str, "!kernel": str, "call": OPT_STR, "kind": OPT_STR,
                "calls": OPT_NUM, "cpu_s": OPT_NUM, "device_s": OPT_NUM, "time_s": OPT_NUM,
                "bytes": OPT_NUM, "flops": OPT_NUM, "bytes_from": OPT_STR, "time_min_s": OPT_NUM}
_DEVICE_KERNEL = {"!name": str, "device_s": OPT_NUM, "calls": OPT_NUM}
_EAGER_NODE = {"!node": str, "calls": OPT_NUM, "cpu_s": OPT_NUM, "device_s": OPT_NUM,
               "time_s": OPT_NUM}

SHAPES: dict[str, Any] = {
    "manifest": {
        "format": OPT_STR, "format_version": OPT_INT, "status": OPT_STR, "phase": OPT_STR,
        "current_graph": OPT_STR, "host": OPT_STR, "pid": OPT_INT, "user": OPT_STR,
        "command": (list, str, NONE), "cwd": OPT_STR, "started_at": OPT_NUM,
        "finished_at": OPT_NUM, "versions": OPT_DICT, "error": OPT_DICT,
        "graphs": [{"!id": ID, "kind": OPT_STR, "compile_id": OPT_STR, "status": OPT_STR}],
        "compiles": [{"!id": ID, "graphs": OPT_LIST}],
        "warnings": [str], "not_available": [str], "config_overrides": OPT_DICT, "tuidebug_config": OPT_DICT,
        "imported_from": OPT_DICT, "made_by": OPT_DICT,
        "script_error": OPT_DICT, "script_exit_code": OPT_INT, "profile_runs": OPT_INT,
        "applied": OPT_DICT, "collectives_not_logged": OPT_STR,
        "skipped_frames": [{"!function": str, "file": OPT_STR, "line": OPT_INT,
                            "reason": OPT_STR, "count": OPT_INT}],
    },
    "config": {"values": OPT_DICT, "changed": OPT_DICT, "set_by_tuidebug": OPT_LIST},
    "runtime": {"checks": OPT_DICT},
    "advice": {"suggestions": OPT_LIST, "tried": OPT_LIST, "baseline": OPT_DICT},
    "numerics": {"compiles": [{"!compile_id": str, "kernel": OPT_STR, "verdict": OPT_STR,
                               "why": OPT_STR, "reruns": OPT_LIST}]},
    "compile": {"id": OPT_STR, "graphs": OPT_LIST, "metrics": OPT_DICT,
                "backward_metrics": OPT_DICT, "counters": OPT_DICT, "guards": (list, str, NONE),
                "dynamo_graph_break_reason": OPT_LIST, "recompile_reasons": OPT_LIST},
    "compile_shapes": {
        "id": OPT_STR, "guard_tree": (bool, NONE), "cut": OPT_INT, "recompile": OPT_DICT,
        "symbols": [{"!name": str, "source": OPT_STR, "sources": [str], "kind": OPT_STR,
                     "hint": (int, str, NONE), "lower": (int, str, NONE),
                     "upper": (int, str, NONE), "range": OPT_STR, "created_range": OPT_STR,
                     "replaced_by": OPT_STR, "user_line": OPT_DICT}],
        "guards": [{"!kind": str, "source": OPT_STR, "code": OPT_STR, "expr": OPT_STR,
                    "user_line": OPT_DICT}],
        "specializations": [{"symbol": OPT_STR, "source": OPT_STR, "sources": [str],
                             "value": (int, str, NONE), "reason": OPT_STR, "guard": OPT_STR,
                             "user_line": OPT_DICT}],
    },
    "compile_cache": {
        "id": OPT_STR,
        "lookups": [{"!cache": str, "!result": str, "key": OPT_STR, "graph": OPT_STR,
                     "graph_kind": OPT_STR, "bypass_reason": OPT_STR, "detailed": OPT_STR,
                     "components": [{"!name": str, "!hash": str, "value": OPT_STR}]}],
    },
    "meta": {
        "id": OPT_STR, "kind": OPT_STR, "compile_id": OPT_STR, "status": OPT_STR,
        "stages": [{"index": int, "name": str, "kind": OPT_STR, "subsystem": OPT_STR,
                    "duration_s": OPT_NUM, "changed": (bool, NONE), "file": OPT_STR,
                    "nodes": OPT_INT, "note": OPT_STR,
                    "counts": {"added": int, "removed": int, "changed": int},
                    "changes": {"added": [str], "removed": [str], "changed": [str]}}],
        "phase_times_s": OPT_DICT, "phase_starts_s": OPT_DICT, "kernels": OPT_INT,
        "fusion": OPT_DICT, "cudagraphs": OPT_DICT, "from_cache": (bool, NONE),
        "ddp_bucket": {"index": int, "buckets": int, "bytes": OPT_INT, "params": OPT_LIST,
                       "extended_ops": OPT_INT, "bucket_bytes_cap": OPT_INT,
                       "first_bucket_cap": OPT_INT, "all_bytes": OPT_LIST},
    },
    "snapshot": {
        "graph": OPT_STR, "stage": OPT_STR,
        "changes": {"added": [str], "removed": [str], "changed": [str]},
        "nodes": [{"!name": str, "op": OPT_STR, "target": OPT_STR, "args": OPT_LIST,
                   "kwargs": OPT_DICT, "inputs": [str], "users": [str], "tensor": OPT_DICT,
                   "tensors": OPT_LIST, "source": OPT_DICT, "module": OPT_STR,
                   "module_type": OPT_STR}],
    },
    "ir": {"graph": OPT_STR,
           "nodes": [{"!name": str, "type": OPT_STR, "ir_type": OPT_STR, "members": [str],
                      "origins": [str], "reads": OPT_LIST, "writes": OPT_LIST, "users": [str],
                      "accesses": [{"!buffer": str, "mode": OPT_STR, "index": OPT_STR,
                                    "ranges": OPT_DICT}],
                      "device": OPT_STR}]},
    "kernels": {"kernels": [{"!name": str, "kind": OPT_STR, "file": OPT_STR,
                             "wrapper_line": OPT_INT, "handles": [str],
                             "source_nodes": [str], "original_aten": OPT_LIST,
                             "calls": OPT_INT, "lines": OPT_INT}]},
    "timings": {"kernels": OPT_DICT, "run": OPT_DICT},
    "collectives": {"graph": OPT_STR, "rank": OPT_INT, "groups": OPT_DICT,
                    "reordered": (bool, NONE), "issued_by_wrapper": (bool, NONE),
                    "collectives": [{"!index": int, "!op": str, "fx_index": OPT_INT,
                                     "node": OPT_STR, "namespace": OPT_STR, "target": OPT_STR,
                                     "group": OPT_STR, "group_ranks": OPT_LIST,
                                     "args": OPT_DICT, "inputs": OPT_LIST, "outputs": OPT_LIST,
                                     "bytes": OPT_INT, "waits_for": OPT_STR,
                                     "source": OPT_DICT, "user_source": OPT_DICT,
                                     "kernel": OPT_STR, "wrapper_line": OPT_INT}]},
    "provenance": {"kernels": OPT_DICT, "fx_to_kernels": OPT_DICT, "pre_to_post": OPT_DICT},
    "error": {"phase": OPT_STR, "type": OPT_STR, "message": OPT_STR, "traceback": (list, str, NONE),
              "graph": OPT_STR, "compile_id": OPT_STR},
    # JSON-lines files: the shape of one line
    "fusion": {"action": OPT_STR, "node1": OPT_STR, "node2": OPT_STR, "reason": OPT_STR,
               "result": OPT_STR, "members": OPT_LIST},
    "autotune": {"op": OPT_STR, "kind": OPT_STR, "inputs": OPT_LIST, "winner": OPT_STR,
                 "choices": [{"name": OPT_STR, "kind": OPT_STR, "time_ms": OPT_NUM,
                              "error": OPT_STR, "config": OPT_DICT, "description": OPT_STR}]},
    # profile.json (tuidebug trace --profile): the file, then each entry of its "compiles"
    "profile": {"runs": OPT_INT, "warmup": OPT_INT, "compiles": OPT_DICT},
    "profile_compile": {
        "graphs": [str], "eager_graph": OPT_STR, "runs": OPT_INT, "warmup": OPT_INT,
        "device": OPT_STR, "cudagraphs": (bool, NONE), "activities": [str], "note": OPT_STR,
        "compiled": _RUN, "eager": _RUN, "kernels": [_KERNEL_CALL],
        "device_kernels": [_DEVICE_KERNEL], "eager_nodes": [_EAGER_NODE],
        "device_peak": OPT_DICT,
        "backward": {"graphs": [str], "compiled_by_profile": (bool, NONE), "compiled": _RUN,
                     "eager": _RUN, "kernels": [_KERNEL_CALL],
                     "device_kernels": [_DEVICE_KERNEL], "eager_nodes": [_EAGER_NODE],
                     "eager_nodes_from": OPT_STR, "note": OPT_STR,
                     "eager_other": {"calls": OPT_NUM, "cpu_s": OPT_NUM, "device_s": OPT_NUM}},
    },
    # vllm.json (an imported vLLM log): its config, each piecewise compile, its graph dumps
    "vllm": {"config": OPT_DICT, "config_line": OPT_INT, "split_graph": OPT_STR,
             "submodules": [{"!name": str, "!file": str, "lines": OPT_INT}],
             "compiles": [{"piecewise_index": OPT_INT, "submod_name": OPT_STR,
                           "total_piecewise_compiles": OPT_INT,
                           "compile_range_start": OPT_INT, "compile_range_end": OPT_INT,
                           "is_single_size": (bool, NONE),
                           "is_cudagraph_capture_size": (bool, NONE), "line": OPT_INT,
                           "graphs": [str]}],
             "dumps": [{"!name": str, "!file": str, "line": OPT_INT,
                        "compile_id": OPT_STR}]},
    "launches": {"!kernel": str, "compile_id": OPT_STR, "launch": OPT_DICT, "launchers": OPT_INT},
}
# compiles/<id>.shapes-brief.json: the shapes without the guards, with their counts
SHAPES["compile_shapes_brief"] = {
    **{k: v for k, v in SHAPES["compile_shapes"].items() if k != "guards"},
    "guard_counts": {"kept": int, "shape": int}}

_DROP = object()


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", int: "an integer",
            float: "a number", bool: "true/false", NONE: "null"}.get(type(value),
                                                                     type(value).__name__)


def _expected(shape: Any) -> str:
    if isinstance(shape, dict):
        return "an object"
    if isinstance(shape, list):
        return "a list"
    types = shape if isinstance(shape, tuple) else (shape,)
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer",
             float: "a number", bool: "true/false", NONE: "null"}
    return " or ".join(dict.fromkeys(names[t] for t in types
                                     if not (t is int and float in types)))


def _ok(value: Any, types: Any) -> bool:
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool) and bool not in types:
        return False  # true is not an index or an id
    return isinstance(value, types)


def _check(value: Any, shape: Any, where: str, report: Callable[[str], None]) -> Any:
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            report(f"{where or 'the file'}: expected an object, got {_type_name(value)}; ignored")
            return _DROP
        out = dict(value)
        for key, sub in shape.items():
            name = key.lstrip("!")
            if name not in out:
                if key.startswith("!"):
                    report(f"{where or 'the file'}: no {name!r}; ignored")
                    return _DROP
                continue
            if out[name] is None and not isinstance(sub, (dict, list)) and _ok(None, sub):
                continue
            checked = _check(out[name], sub, f"{where}.{name}" if where else name, report)
            if checked is _DROP:
                if key.startswith("!"):
                    return _DROP
                del out[name]
            else:
                out[name] = checked
        return out
    if isinstance(shape, list):
        if value is None:
            return value
        if not isinstance(value, list):
            report(f"{where}: expected a list, got {_type_name(value)}; ignored")
            return _DROP
        items = []
        for i, item in enumerate(value):
            checked = _check(item, shape[0], f"{where}[{i}]", report)
            if checked is not _DROP:
                items.append(checked)
        return items
    if not _ok(value, shape):
        report(f"{where}: expected {_expected(shape)}, got {_type_name(value)}; ignored")
        return _DROP
    return value


def _compile(shape: Any) -> tuple[Any, ...]:
    """A shape as nested tuples that ``_valid`` walks without parsing keys again."""
    if isinstance(shape, dict):
        return ("d", tuple((k.lstrip("!"), k.startswith("!"), _compile(v))
                           for k, v in shape.items()))
    if isinstance(shape, list):
        return ("l", _compile(shape[0]))
    types = shape if isinstance(shape, tuple) else (shape,)
    return ("t", types, bool in types, NONE in types)


def _valid(value: Any, c: tuple[Any, ...]) -> bool:
    """Whether ``_check`` would find nothing wrong in ``value``: the same rules, no copies,
    no messages (a well-formed 2.6 MB snapshot: a fifth of the time). A field or list item
    of a plain type is checked in place, without a call per value (a snapshot's node lists
    of names: most of its values)."""
    tag = c[0]
    if tag == "t":
        if value.__class__ is bool and not c[2]:
            return False
        return isinstance(value, c[1])
    if tag == "d":
        if not isinstance(value, dict):
            return False
        for name, required, sub in c[1]:
            if name in value:
                v = value[name]
                if sub[0] == "t":
                    if v is None and sub[3]:
                        continue
                    if (v.__class__ is bool and not sub[2]) or not isinstance(v, sub[1]):
                        return False
                elif not _valid(v, sub):
                    return False
            elif required:
                return False
        return True
    if value is None:
        return True
    if not isinstance(value, list):
        return False
    sub = c[1]
    if sub[0] == "t":
        types, bools = sub[1], sub[2]
        for item in value:
            if (item.__class__ is bool and not bools) or not isinstance(item, types):
                return False
        return True
    for item in value:
        if not _valid(item, sub):
            return False
    return True


_COMPILED: dict[str, tuple[Any, ...]] = {}


def check(kind: str, data: Any, report: Callable[[str], None], *, limit: int = 5) -> Any:
    """``data`` (a parsed file of ``kind``) with wrongly typed fields removed; None when the
    whole file has the wrong shape. At most ``limit`` messages are reported per file (then one
    saying how many more)."""
    compiled = _COMPILED.get(kind)
    if compiled is None:
        compiled = _COMPILED[kind] = _compile(SHAPES[kind])
    if _valid(data, compiled):  # the usual case: nothing to remove or report
        return data
    messages: list[str] = []
    out = _check(data, SHAPES[kind], "", messages.append)
    for m in messages[:limit]:
        report(m)
    if len(messages) > limit:
        report(f"… and {len(messages) - limit} more fields of the wrong type")
    return None if out is _DROP else out
