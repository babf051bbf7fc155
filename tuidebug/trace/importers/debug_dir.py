"""Import a TORCH_COMPILE_DEBUG folder into a tuidebug trace directory. Pure text; no torch.

``TORCH_COMPILE_DEBUG=1`` writes, under ``./torch_compile_debug/`` (or
``$TORCH_COMPILE_DEBUG_DIR/torch_compile_debug/``)::

    tlparse/dedicated_log_torch_trace_*.log       the structured log, one per process
    run_<date>-pid_<pid>/torchdynamo/debug.log
    run_<date>-pid_<pid>/torchinductor/aot_model___<n>_debug.log
    run_<date>-pid_<pid>/torchinductor/model__<aot id>_<kind>_<n>.<m>/
        fx_graph_readable.py     the graph Inductor received      -> stage aot_<kind>
        fx_graph_transformed.py  after the post-grad passes       -> stage post_grad
        ir_pre_fusion.txt  ir_post_fusion.txt                     -> ir_*.txt and ir_*.json
        output_code.py                                            -> code/
        fx_graph_runnable.py                                      -> repro/
        inductor_provenance_tracking_node_mappings.json           -> provenance.json

The run's structured log (matched by process id) is imported as a TORCH_TRACE log; each
``model__…`` folder is then matched to its graph by the AOT id of its output code
(``0_forward``) and adds what the log lacks: the IR before and after fusion, and what the log
lost. Without a log, each folder becomes a graph of its own.

The folder is untrusted like a trace (docs/security.md): every file read is confined to the
debug root and read through ``tuidebug.trace.format.safefile`` (resolved inside the root, symbolic
links only to targets inside it, regular files only, ``MAX_FILE_BYTES`` each); what is refused
is skipped and named in the import's warnings.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from tuidebug.trace.format import safefile
from tuidebug.trace.format import schema
from tuidebug.trace.format import layout
from tuidebug.trace.importers import irtext, tracelog
from tuidebug.trace.importers.graphs import ImportedGraph
from tuidebug.trace.importers.sources import log_rank
from tuidebug.trace.importers.torch_trace import TorchTraceImporter

_RUN_RE = re.compile(r"^run_(?P<stamp>.+)-pid_(?P<pid>\d+)$")
_MODEL_RE = re.compile(r"^model__(?P<aot>\d+)_(?P<kind>forward|backward|inference)_(?P<n>[\d.]+)$")

#: the largest file of a debug folder that is read (graphs, IR, code, logs)
MAX_FILE_BYTES = safefile.MAX_JSON_BYTES

MISSING_DEBUG = [
    "per-pass snapshots",
    "fusion decisions (only their result, the fused nodes of ir_post_fusion)",
    "autotune choices",
    "eager-vs-compiled accuracy check",
    "kernel run times",
]


def debug_root(path: Path) -> Path | None:
    """The ``torch_compile_debug`` folder for ``path`` (itself, its parent run, or a child)."""
    p = path
    if _RUN_RE.match(p.name) and p.parent.is_dir():
        return p.parent
    if p.name == "torch_compile_debug" and p.is_dir():
        return p
    child = p / "torch_compile_debug"
    if child.is_dir():
        return child
    if p.is_dir() and any(_RUN_RE.match(c.name) and c.is_dir() for c in _children(p)):
        return p
    return None


def _children(p: Path) -> list[Path]:
    try:
        return sorted(p.iterdir())
    except OSError:
        return []


def refusal(root: Path, path: Path, *, regular: bool = False) -> str | None:
    """Why ``path`` is not read (it leads out of ``root``, or with ``regular`` is not a regular
    file), or None."""
    try:
        safefile.confine(root, path)
    except safefile.Refused as e:
        return str(e)
    if regular and not safefile.is_regular(path):
        return "not a regular file; not read"
    return None


def read_text(root: Path, path: Path, cap: int = MAX_FILE_BYTES) -> str:
    """The text of ``path``, confined to ``root`` and capped (``safefile.Refused``, OSError)."""
    safefile.confine(root, path)
    data, _ = safefile.read_bytes(path, cap)
    return data.decode("utf-8", errors="replace")


def is_debug_dir(path: Path) -> bool:
    if not path.is_dir():
        return False
    if _RUN_RE.match(path.name) and ((path / "torchinductor").is_dir()
                                     or (path / "torchdynamo").is_dir()):
        return True
    root = debug_root(path)
    if root is None:
        return False
    return bool(runs(root)) or bool(tlparse_logs(root))


def runs(root: Path, notes: list[str] | None = None) -> list[Path]:
    """``run_*`` folders, oldest first (their names start with the date); one that leads out
    of ``root`` is left out (and named in ``notes``)."""
    out = []
    for c in _children(root):
        if _RUN_RE.match(c.name) and c.is_dir():
            why = refusal(root, c)
            if why is None:
                out.append(c)
            elif notes is not None:
                notes.append(f"{c}: {why}")
    return out


def tlparse_logs(root: Path, notes: list[str] | None = None) -> list[Path]:
    """The structured logs in ``tlparse/``: regular files inside ``root`` (others named in
    ``notes``) that look like TORCH_TRACE logs."""
    out = []
    for c in _children(root / "tlparse"):
        why = refusal(root, c, regular=True)
        if why is not None:
            if notes is not None and not c.name.startswith("."):
                notes.append(f"{c}: {why}")
        elif tracelog.is_torch_trace_file(c):
            out.append(c)
    return out


def run_pid(run: Path) -> int | None:
    m = _RUN_RE.match(run.name)
    return int(m["pid"]) if m else None


def log_pid(log: Path) -> int | None:
    """The process id in the first record header of a log."""
    try:
        with safefile.open_regular(log) as f:
            for _ in range(50):
                raw = f.readline(safefile.MAX_LINE_BYTES)
                if not raw:
                    return None
                m = tracelog._HEADER_RE.match(raw.rstrip(b"\r\n"))
                if m:
                    return int(m["thread"])
    except (OSError, ValueError):
        return None
    return None


def choose(path: Path, rank: int | None = None) -> tuple[Path, Path | None, Path | None,
                                                          list[str]]:
    """(debug root, run folder, structured log, notes) for the run to import."""
    notes: list[str] = []
    root = debug_root(path) or path
    all_runs = runs(root, notes)
    run: Path | None = path if _RUN_RE.match(path.name) else None
    if run is not None and run not in all_runs and refusal(root, run) is not None:
        run = None  # a run folder given by name that leads out of the debug root
    logs = tlparse_logs(root, notes)
    log: Path | None = None
    if rank is not None:
        ranked = [lg for lg in logs if log_rank(lg) == rank]
        if not ranked:
            raise ValueError(f"no log for rank {rank} in {root / 'tlparse'}")
        log = max(ranked, key=_mtime)
        pid = log_pid(log)
        run = run or next((r for r in all_runs if run_pid(r) == pid), None)
    if run is None and all_runs:
        run = all_runs[-1]
        if len(all_runs) > 1:
            notes.append(f"{len(all_runs)} runs in {root}; imported the newest, {run.name} "
                         "(open a run_* folder to import another)")
    if log is None and run is not None:
        pid = run_pid(run)
        log = next((lg for lg in logs if log_pid(lg) == pid), None)
        if log is None and logs:
            notes.append(f"no structured log of process {pid} in {root / 'tlparse'}; Dynamo and "
                         "AOT graphs, metrics and guards are not imported")
    elif log is None and logs:
        log = max(logs, key=_mtime)
    return root, run, log, notes


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


class DebugDirImporter(TorchTraceImporter):
    finish_early = False  # before_finish adds to the graphs after the log is read
    def __init__(self, path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                 rank: int | None = None, ranks: list[int] | None = None, **kw: Any) -> None:
        src = Path(path)
        self.root, self.run_dir, log, notes = choose(src, rank)
        super().__init__(log, out_dir, source=src, kind="torch_compile_debug", ranks=ranks, **kw)
        self.warnings += notes
        self.folders: dict[str, Path] = {}  # "0_forward" -> model__0_forward_4.0/
        if self.run_dir is not None:
            ind = self.run_dir / "torchinductor"
            for c in _children(ind):
                m = _MODEL_RE.match(c.name)
                if m and c.is_dir():
                    why = refusal(self.root, c)
                    if why is not None:
                        self.warn(f"{c}: {why}")
                        continue
                    key = f"{m['aot']}_{m['kind']}"
                    self.folders.setdefault(key, c)
        self.ir_found = False

    def before_finish(self) -> None:
        used: set[str] = set()
        for g in list(self.graphs.values()):
            if g.aot_id and g.aot_id in self.folders:
                used.add(g.aot_id)
                self._overlay(g, self.folders[g.aot_id])
        for key, folder in sorted(self.folders.items(), key=lambda kv: _aot_sort(kv[0])):
            if key in used:
                continue
            aot, kind = key.split("_", 1)
            cid = f"aot{aot}"
            g = self.book.graph(cid, kind)
            g.aot_id = key
            self._overlay(g, folder)
        self._copy_logs()

    def _overlay(self, g: ImportedGraph, folder: Path) -> None:
        def read(name: str) -> str | None:
            p = folder / name
            if not os.path.lexists(p):
                return None
            try:
                return read_text(self.root, p)
            except safefile.Refused as e:
                self.warn(f"{p}: {e}")
            except OSError as e:
                self.warn(f"{p}: unreadable ({e.strerror or e})")
            return None

        rel = os.path.relpath(folder, self.root)
        g.extra_meta["debug_folder"] = rel
        aot_stage = f"aot_{g.kind}"
        readable = read("fx_graph_readable.py")
        transformed = read("fx_graph_transformed.py")
        if readable and not any(s["name"] in (aot_stage, "post_grad") and s.get("file")
                                for s in g.stages):
            self.snapshot_text(g, aot_stage, readable, where=f"{rel}/fx_graph_readable.py")
        if transformed and not any(s["name"] == "post_grad" and s.get("file") for s in g.stages):
            self.snapshot_text(g, "post_grad", transformed,
                               where=f"{rel}/fx_graph_transformed.py")
        for which, base in (("pre", schema.IR_PRE), ("post", schema.IR_POST)):
            text = read(f"{base}.txt")
            if text is None:
                continue
            self.ir_found = True
            ir = irtext.parse_ir_text(text, g.id)
            g.out.write_ir(which, ir["nodes"], text)
            if which == "post":
                g.fused = irtext.fused_count(ir)
                g.extra_meta["fusion_note"] = ("fused groups are in ir_post_fusion; the "
                                               "decisions and rejections are not in this folder")
        code = read("output_code.py")
        if code and not g.kernel_index:
            self.write_code(g, code)
        runnable = read("fx_graph_runnable.py")
        repro = g.dir / schema.REPRO_DIR / "fx_graph_runnable.py"
        if runnable and not repro.exists():
            g.out.write_runnable(runnable)
        mappings = read("inductor_provenance_tracking_node_mappings.json")
        if mappings and not any(h.get("fx_nodes") for h in g.handles.values()):
            try:
                data = safefile.loads(mappings)
            except json.JSONDecodeError as e:
                self.warn(f"{rel}/inductor_provenance_tracking_node_mappings.json: corrupt JSON "
                          f"({e}); provenance not imported")
                data = None
            if isinstance(data, dict):
                self.has_provenance = True
                g.pre_to_post = data.get("preToPost") or g.pre_to_post
                for h, info in layout.provenance_handles(data, None).items():
                    g.handle(h)["fx_nodes"] = info["fx_nodes"]

    def _copy_logs(self) -> None:
        """Non-empty Dynamo / AOT debug logs of the run, kept as text beside the trace."""
        if self.run_dir is None:
            return
        kept = []
        for p in sorted(self.run_dir.rglob("*.log")):
            try:
                text = read_text(self.root, p)
                if not text:
                    continue
                rel = os.path.relpath(p, self.run_dir)
                w = self.writer
                assert w is not None
                w.write_text(w.path("imported", "logs", rel), text)
                kept.append(f"imported/logs/{rel}")
            except safefile.Refused as e:
                self.warn(f"{p}: {e}")
            except OSError as e:
                self.warn(f"{p}: unreadable ({e.strerror or e})")
        self._kept_logs = kept

    def extra_imported_from(self) -> dict[str, Any]:
        return {"debug_root": str(self.root.resolve()),
                "run": str(self.run_dir.resolve()) if self.run_dir else None,
                "debug_logs": getattr(self, "_kept_logs", [])}

    def missing(self) -> list[str]:
        out = list(MISSING_DEBUG)
        if not self.ir_found:
            out.append("Inductor IR (ir_pre_fusion / ir_post_fusion)")
        if not self.has_provenance:
            out.append("kernel provenance")
        if self.log is None:
            out.append("Dynamo and AOT graphs, compilation metrics, guards, graph breaks and "
                       "recompile reasons (no structured log of this run in tlparse/)")
        if self.cache_hits:
            out.append("graphs of compiles served from a cache")
        return out


def _aot_sort(key: str) -> tuple[int, str]:
    aot, _, kind = key.partition("_")
    return (safefile.to_int(aot, 0), kind)
