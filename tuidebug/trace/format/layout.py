"""How compiler facts become files of a trace: the part every trace producer shares. No torch.

The live capture (``tuidebug.compiler.capture``) and the importers must write the same layout,
so that every viewer works on both. These helpers are the torch-free half of that logic:
graph ids from compile ids, the kernel split of Inductor's output code (``code/``), provenance
(``provenance.json``), stage diffs and ``meta.json``. They take plain data (JSON-shaped graph
nodes, strings), never torch objects.

"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Iterable

from tuidebug.trace.format import atomic, schema
from tuidebug.trace.format import kernels as kernel_text
from tuidebug.trace.format.graph_meta import StageEntry
from tuidebug.trace.format.kernel_entry import KernelEntry

_FRAME_RE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')


def safe_id(text: str) -> str:
    """A compile id as a file-name-safe id: ``"0/0_1"`` -> ``"0_0_1"``."""
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_") or "x"


def graph_id(compile_id: str, kind: str) -> str:
    return f"{safe_id(compile_id)}-{kind}"


def compile_id_from_meta(meta: dict[str, Any]) -> str | None:
    """The compile id of a structured-log record, as TORCH_TRACE/tlparse write it:
    ``"0/0"``, ``"0/0_1"`` for restart attempt 1, ``"!0/0/0"`` under compiled autograd."""
    f, c = meta.get("frame_id"), meta.get("frame_compile_id")
    if f is None or c is None:
        return None
    cid = f"{f}/{c}"
    if meta.get("attempt"):
        cid += f"_{meta['attempt']}"
    ca = meta.get("compiled_autograd_id")
    return f"!{ca}/{cid}" if ca is not None else cid


def stack_frames(stack: str | None, cache: dict[str, Any]) -> list[dict[str, Any]]:
    """Every frame of a Python stack trace text, outermost first: ``{file, line, fn, code}``."""
    if not stack:
        return []
    key = "\0frames\0" + stack
    if key in cache:
        return cache[key]
    frames = []
    lines = stack.splitlines()
    for i, line in enumerate(lines):
        m = _FRAME_RE.search(line)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            code = "" if _FRAME_RE.search(code) else code  # a frame without a code line
            frames.append({"file": m["file"], "line": int(m["line"]), "fn": m["fn"],
                           "code": code})
    cache[key] = frames
    return frames


def parse_stack_trace(stack: str | None, cache: dict[str, Any]) -> dict[str, Any] | None:
    """The innermost frame of a Python stack trace text: ``{file, line, fn, code}``."""
    if not stack:
        return None
    if stack not in cache:
        frames = stack_frames(stack, cache)
        cache[stack] = frames[-1] if frames else None
    return cache[stack]


# -- stages ---------------------------------------------------------------------------------------

def fingerprint_nodes(nodes: Iterable[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    """Per-node signature of a JSON graph snapshot, to tell what a stage changed."""
    return {n["name"]: (n.get("op"), n.get("target"), repr(n.get("args")), repr(n.get("kwargs")))
            for n in nodes}


def diff_fingerprints(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[str]]:
    return {
        "added": [k for k in new if k not in old],
        "removed": [k for k in old if k not in new],
        "changed": [k for k in new if k in old and old[k] != new[k]],
    }


def stage_file(index: int, name: str, *, fx_text: bool = False) -> str:
    """``stages/NNN-<name>.json`` (a JSON snapshot), or ``….txt`` (the graph as a log printed it)."""
    return f"{schema.STAGES_DIR}/{index:03d}-{safe_id(name)}" + (
        schema.FX_TEXT_SUFFIX if fx_text else ".json")


def is_fx_text(file: str) -> bool:
    """Whether a stage's snapshot file is a graph as a log printed it (``stages/NNN-x.txt``)."""
    return file.endswith(schema.FX_TEXT_SUFFIX)


def phase_durations(starts: dict[str, float], end: float | None = None) -> dict[str, float]:
    """Seconds spent in each phase, from the phases' start offsets: each runs until the next one
    starts; the last until ``end`` (0 when unknown)."""
    items = sorted(starts.items(), key=lambda kv: kv[1])
    out = {}
    for i, (phase, start) in enumerate(items):
        stop = items[i + 1][1] if i + 1 < len(items) else max(end if end is not None else start, start)
        out[phase] = round(stop - start, 6)
    return out


def graph_meta(graph_id_: str, kind: str, compile_id: str, status: str,
               stages: list[StageEntry], phase_times: dict[str, float],  # start offsets
               kernels: int, fusion: dict[str, Any], *, end: float | None = None,
               **extra: Any) -> dict[str, Any]:
    """The content of ``graphs/<id>/meta.json``; ``end`` closes the last phase (see
    :func:`phase_durations`)."""
    return {"id": graph_id_, "kind": kind, "compile_id": compile_id, "status": status,
            "stages": stages, "phase_times_s": phase_durations(phase_times, end),
            "phase_starts_s": phase_times, "kernels": kernels,
            "fusion": fusion, **extra}


# -- output code ----------------------------------------------------------------------------------

def write_output_code(graph_dir: Path, code: str, *,
                      write_text: Callable[[Path, str], None] = atomic.write_text,
                      write_json: Callable[[Path, Any], None] = atomic.write_json,
                      ) -> list[KernelEntry]:
    """Write Inductor's output code as ``code/wrapper.py`` plus one file per kernel and
    ``code/kernels.json``; returns the kernel index."""
    write_text(graph_dir / schema.WRAPPER, code)
    parsed = kernel_text.split_wrapper(code)
    index: list[KernelEntry] = []
    for k in parsed.kernels:
        rel = f"{schema.CODE_DIR}/{k.name}{k.ext}"
        write_text(graph_dir / rel, k.source)
        index.append(kernel_text.kernel_index_entry(k, rel))
    index += [kernel_text.extern_index_entry(e) for e in parsed.externs]
    write_json(graph_dir / schema.KERNELS_INDEX, {"kernels": [k.to_json() for k in index]})
    return index


def provenance_json(kernel_index: list[KernelEntry], handles: dict[str, dict[str, Any]],
                    fx_source: dict[str, dict[str, Any] | None],
                    pre_to_post: dict[str, Any], stack_cache: dict[str, Any]) -> dict[str, Any]:
    """``provenance.json``: kernel -> IR nodes, FX nodes and user source lines.

    ``handles`` maps Inductor's provenance handles (``"cpp_fused_relu_0:2"``) to
    ``{"ir_nodes": [...], "fx_nodes": [...], "stack_traces": [...]}``; ``fx_source`` maps FX node
    names to their source location. Kernels without a handle fall back to the ``Source Nodes``
    comment of the generated code.
    """
    kernels: dict[str, Any] = {}
    fx_to_kernels: dict[str, list[str]] = {}
    for k in kernel_index:
        ir_nodes: list[str] = []
        fx_nodes: list[str] = []
        stacks: list[str] = []
        for h in k.handles:
            info = handles.get(h)
            if not info:
                continue
            ir_nodes += [x for x in info.get("ir_nodes") or [] if x not in ir_nodes]
            fx_nodes += [x for x in info.get("fx_nodes") or [] if x not in fx_nodes]
            stacks += [x for x in info.get("stack_traces") or [] if x not in stacks]
        if not fx_nodes:
            fx_nodes = [x for x in k.source_nodes if x in fx_source]
        sources: list[dict[str, Any]] = []
        for fx in fx_nodes:
            src = fx_source.get(fx)
            if src and src not in sources:
                sources.append(src)
        for st in stacks:
            src = parse_stack_trace(st, stack_cache)
            if src and src not in sources:
                sources.append(src)
        kernels[k.name] = {"kind": k.kind, "ir_nodes": ir_nodes, "fx_nodes": fx_nodes,
                           "source": sources}
        for fx in fx_nodes:
            fx_to_kernels.setdefault(fx, []).append(k.name)
    return {"kernels": kernels, "fx_to_kernels": fx_to_kernels, "pre_to_post": pre_to_post}


def provenance_handles(mappings: dict[str, Any] | None,
                       stack_traces: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Inductor's provenance artifacts (``inductor_provenance_tracking_node_mappings`` and
    ``inductor_provenance_tracking_kernel_stack_traces``) as ``handles`` for
    :func:`provenance_json`."""
    out: dict[str, dict[str, Any]] = {}
    code_to_post = (mappings or {}).get("cppCodeToPost") or {}
    if isinstance(code_to_post, dict):
        for handle, nodes in code_to_post.items():
            if isinstance(nodes, list):
                out.setdefault(str(handle), {"ir_nodes": [], "fx_nodes": [], "stack_traces": []})[
                    "fx_nodes"] = [str(n) for n in nodes]
    if isinstance(stack_traces, dict):
        for handle, stacks in stack_traces.items():
            if isinstance(stacks, list):
                out.setdefault(str(handle), {"ir_nodes": [], "fx_nodes": [], "stack_traces": []})[
                    "stack_traces"] = [str(s) for s in stacks]
    return out


def write_json_compact(path: Path, data: Any) -> None:
    """Big generated JSON (graph snapshots) without indentation: several times faster."""
    atomic.write_json(path, data, compact=True)


def shapes_brief(shapes: dict[str, Any]) -> dict[str, Any]:
    """A compile's shapes (``compiles/<id>.shapes.json``'s body) without its guards, with
    ``guard_counts``: ``kept`` (the guards listed), ``shape`` (those on sizes: with an
    ``expr``) — ``compiles/<id>.shapes-brief.json``."""
    guards = shapes.get("guards")
    guards = guards if isinstance(guards, list) else []
    return {**{k: v for k, v in shapes.items() if k != "guards"},
            "guard_counts": {"kept": len(guards),
                             "shape": sum(1 for g in guards if isinstance(g, dict)
                                          and g.get("expr"))}}
