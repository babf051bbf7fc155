"""A few lines of the user's source around each user line of ``shapes.json`` (``context``),
read in the user's process while the source is there (a trace is read elsewhere, later, and
its reader never opens a file outside the trace)."""

from __future__ import annotations

import linecache
import os
from pathlib import Path
from typing import Any, Iterable

AROUND = 3  # lines before and after the user line
MAX_CODE = 200  # characters per line kept
KINDS = ("symbols", "guards", "specializations")


def _search_roots() -> list[Path]:
    """Where Dynamo's guard comments start a shortened path: torch shortens a file against the
    torch package (``torch.utils._traceback.shorten_filename``): a user file is named relative
    to one of its parents."""
    import torch

    return list(Path(os.path.dirname(torch.__file__)).parents)


def _resolve(file: str, known: Iterable[str]) -> str | None:
    """The path of a user line's file: itself when absolute, else the known absolute file (of
    another user line, or in linecache) that it shortens, else the file under a search root."""
    if not file or file.startswith("<"):
        return None
    if os.path.isabs(file):
        return file
    tail = os.sep + file.replace("/", os.sep)
    ends = {k for k in list(known) + list(linecache.cache)
            if isinstance(k, str) and os.path.isabs(k) and k.endswith(tail)}
    if len(ends) == 1:
        return ends.pop()
    if ends:  # two files of that name: neither is named
        return None
    for root in _search_roots():
        if (root / file).is_file():
            return str(root / file)
    # torch 2.11's guard comments may cut a path mid-name ("ork/main/x.py" for /work/main/x.py):
    # the one known file it ends
    # (a path with a folder in it: a bare "a.py" would match any known "…data.py")
    if "/" not in file:
        return None
    cut = [k for k in known if k.endswith(file.replace("/", os.sep))]
    return cut[0] if len(cut) == 1 else None


def _context(path: str, line: int) -> list[dict[str, Any]]:
    lines = linecache.getlines(path)
    if not lines or not 0 < line <= len(lines):
        return []
    return [{"line": n, "code": lines[n - 1].rstrip("\r\n")[:MAX_CODE]}
            for n in range(max(1, line - AROUND), min(len(lines), line + AROUND) + 1)]


def add_context(data: dict[str, Any]) -> None:
    """Give each user line of ``data`` (a shapes.json body) its ``context``, ``[{line, code}]``:
    the source lines around it (none when the file cannot be read)."""
    items = [item for kind in KINDS for item in data.get(kind) or []
             if isinstance(item.get("user_line"), dict)]
    known = {str(i["user_line"].get("file")) for i in items
             if os.path.isabs(str(i["user_line"].get("file") or ""))}
    cache: dict[tuple[str, int], list[dict[str, Any]]] = {}
    paths: dict[str, str | None] = {}
    for item in items:
        ul = item["user_line"]
        file, line = str(ul.get("file") or ""), ul.get("line")
        if not isinstance(line, int):
            continue
        if file not in paths:
            paths[file] = _resolve(file, known)
        if paths[file] is None:
            continue
        if (file, line) not in cache:
            cache[(file, line)] = _context(paths[file], line)
        if cache[(file, line)]:
            item["user_line"] = {**ul, "context": cache[(file, line)]}
