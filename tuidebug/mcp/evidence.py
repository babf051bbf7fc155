"""Evidence references, and what one expands to.

A reference names a record of a trace by its trace-relative file and a place in it, stable
across sessions and readable by anyone holding the trace:

- ``graphs/0_0-inference/meta.json#/guards/3``: a JSON file and a JSON pointer (RFC 6901) in it;
- ``graphs/0_0-inference/fusion.jsonl#/12/reason``: a JSON-lines file, its record 12, a pointer;
- ``graphs/0_0-inference/code/wrapper.py#L40-L60``: lines of a text file;
- ``graphs/0_0-inference/code/``: a folder's files, each as a reference.

:func:`expand` reads one through the trace's confined reader (``TraceFiles``: no path out of the
trace, no link followed out, only regular files within their size caps), never executing
anything, and answers it as a bounded :class:`~tuidebug.mcp.bounded.Answer`: a large object as
its keys, a large list or a text as pages, each part with its own reference.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

from tuidebug.errors import TraceError
from tuidebug.mcp.bounded import Answer, next_call
from tuidebug.trace.format import compressed, safefile, schema
from tuidebug.trace.format.layout import safe_id
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.tracefiles import TraceFiles

SMALL = 400  # characters: a value this small is shown in full inside its parent's listing
_LINES = re.compile(r"^L(?P<a>\d+)(?:-L?(?P<b>\d+))?$")


def pointer(*parts: Any) -> str:
    """A JSON pointer of ``parts`` (``~`` and ``/`` escaped)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def ref(relpath: str, *parts: Any) -> str:
    """``relpath#/a/b``; ``relpath`` alone without parts."""
    return f"{relpath}#{pointer(*parts)}" if parts else relpath


def graph_file(graph_id: str, name: str) -> str:
    return f"{schema.GRAPHS_DIR}/{graph_id}/{name}"


def compile_file(compile_id: str) -> str:
    """The trace-relative file of a Dynamo compile's record (``0/1`` → ``compiles/0_1.json``)."""
    return f"{schema.COMPILES_DIR}/{safe_id(compile_id)}.json"


def _relpath(text: str) -> PurePosixPath:
    p = PurePosixPath(text)
    if not text or p.is_absolute() or ".." in p.parts or "\\" in text:
        raise TraceError(f"not a reference into the trace: {text!r} (a trace-relative path, "
                         "e.g. graphs/<graph>/meta.json#/stages/0)")
    return p


def _walk(value: Any, frag: str, shown: str) -> Any:
    if frag in ("", "/"):
        return value
    if not frag.startswith("/"):
        raise TraceError(f"{shown}: a JSON pointer starts with '/'")
    for raw in frag[1:].split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            raise TraceError(f"{shown}: nothing at {key!r}")
    return value


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str))


def _part(key: Any, value: Any, base: str) -> dict[str, Any]:
    """One key or element of a large value: itself when small, else its shape and reference."""
    out: dict[str, Any] = {"key": key}
    if _size(value) <= SMALL:
        out["value"] = value
    elif isinstance(value, dict):
        out["object_keys"] = len(value)
    elif isinstance(value, list):
        out["list_length"] = len(value)
    elif isinstance(value, str):
        out["text_chars"] = len(value)
        out["starts"] = value[:160]
    out["ref"] = f"{base}{pointer(key)}" if "#" in base else f"{base}#{pointer(key)}"
    return out


def expand(trace: Trace, handle: str, reference: str, *, budget: int) -> Answer:
    """What ``reference`` names in ``trace``, bounded (see the module docstring)."""
    path_text, _, frag = reference.partition("#")
    rel = _relpath(path_text.rstrip("/") or ".")
    files = TraceFiles(trace.root)
    full = trace.root / Path(*rel.parts) if rel.parts else trace.root
    try:
        real = files.confine(full)
    except safefile.Refused as e:
        raise TraceError(f"{reference}: {e}") from None
    if real.is_dir():
        names = sorted(compressed.logical_name(p.name) + ("/" if p.is_dir() else "")
                       for p in real.iterdir() if not p.is_symlink())
        base = "" if str(rel) == "." else f"{rel}/"
        return Answer("expand", f"the files of {reference or 'the trace'}", handle,
                      items=[{"name": n, "ref": base + n} for n in names], item_name="files")
    if not real.is_file() and not files.exists(full):  # NAME stored as NAME.gz: read as NAME
        raise TraceError(f"{reference}: no such file in the trace")
    name = rel.name
    if name.endswith(".json") or name.endswith(".jsonl"):
        if name.endswith(".jsonl"):
            whole: Any = files.jsonl(full)
        else:
            whole = files.json(full, None)
        if whole is None or files.problems:
            raise TraceError(f"{reference}: " + "; ".join(str(p) for p in files.problems[:3])
                             if files.problems else f"{reference}: unreadable")
        value = _walk(whole, frag, reference)
        base = f"{rel}#{frag}" if frag else str(rel)
        if _size(value) <= budget // 2 or not isinstance(value, (dict, list)):
            return Answer("expand", f"the value at {base}", handle, data={"value": value})
        parts = (list(value.items()) if isinstance(value, dict) else list(enumerate(value)))
        kind = "object" if isinstance(value, dict) else "list"
        return Answer("expand", f"a large {kind} at {base}: its parts, each with a ref",
                      handle, data={"kind": kind, "length": len(parts)},
                      items=[_part(k, v, base) for k, v in parts], item_name="parts")
    text = files.text(full) or ""
    lines = text.splitlines()
    lo, hi = 1, len(lines)
    if frag:
        m = _LINES.match(frag)
        if not m:
            raise TraceError(f"{reference}: lines are named L10 or L10-L20")
        lo = max(int(m["a"]), 1)
        hi = min(int(m["b"] or m["a"]), len(lines))
    shown = [{"line": i, "text": lines[i - 1]} for i in range(lo, hi + 1)]
    ans = Answer("expand", f"lines {lo}-{hi} of {rel} ({len(lines)} lines)", handle,
                 data={"file": str(rel), "lines": len(lines)}, items=shown, item_name="lines")
    if not shown:
        ans.answer = f"{rel} has no line {lo}" if lines else f"{rel} is empty"
    n = next_call("expand", "the whole file, paged", trace=handle, ref=str(rel))
    if frag and n:
        ans.next.append(n)
    return ans
