"""What the cross-rank analysis reads of one rank's trace, and nothing more. No torch.

A rank is reduced to a :class:`RankDigest`: its manifest (status, graphs, compiles with their
summary: compile seconds and cache counts) and a fingerprint — per Dynamo compile id, in the
order the rank compiled them: its cache counts and graphs; per graph the content hash of every
snapshot and of the generated code (normalised for what legitimately differs per rank: file
paths, the device index, process-group names) and the hash of its collective sequence. Ranks
with equal fingerprints are one group; only one rank of each group is opened as a full
:class:`~tuidebug.trace.format.reader.Trace` to be compared (``ranks.py``).

Reading stays cheap at thousands of ranks: per rank the manifest is parsed, and per file of a
graph one ``lstat``; a file stored once for many ranks (hard links: the launcher's dedup) is read
and hashed once per analysis, and every distinct content normalised once (:class:`Hashes`).
A rank's ``compiles/<id>.json`` (its metrics: tens of KB each) is read only when its manifest's
summary lacks the compile's seconds or cache counts (traces made before the summary held them).

Reading is for untrusted folders: nothing is followed through a symbolic link, graph ids must be
plain folder names, every file is read through ``safefile`` (regular files, capped, bounded JSON)
and every value is checked for its type (a graph whose id is not one is listed in ``unread``,
its id quoted). A file ``safefile`` refuses (over 64 MiB, a symbolic
link, not a regular file) is not compared: it stands in the fingerprint as ``UNREAD`` (the same
on every rank: no difference is made of it) and is listed, with why, in the print's ``unread``
(left out of its hash): the analysis says it was not compared, never that it is the same or
differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from tuidebug.trace.format import compressed, layout, safefile, schema, shapes
from tuidebug.trace.format.manifest import GraphEntry, Manifest, is_safe_name, live_status
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries import collectives as coll
from tuidebug.trace.queries.summary import cache_counts

# An absolute path (POSIX) inside code or a snapshot: the part that differs between ranks and
# nodes (checkouts, cache and temporary folders); only its last component is kept.
_PATH_RE = re.compile(r"(?:/[^\s'\"/:,()\[\]]+)+/([^\s'\"/:,()\[\]]+)")
# A rank's own accelerator: rank r of a node computes on cuda:<local rank>, so every snapshot's
# tensor devices and the wrapper's device(type='cuda', index=r), set_device(r) and
# get_raw_stream(r) name it; the index is not compared (the device type is).
_DEVICE_RE = re.compile(r"\b(cuda|xpu|hpu|mtia|npu|mps):\d+\b")
_DEVICE_INDEX_RE = re.compile(r"(device\(type='\w+', index=)\d+(\))")
_DEVICE_CALL_RE = re.compile(r"\b((?:set_device|get_raw_stream|device_guard|DeviceGuard|"
                             r"_DeviceGuard)\()\d+(\))")
# A graph as torch printed it ends with ``# graph id: <the Python object's id>``: an address of
# the rank's own process, never the same on two ranks.
_GRAPH_ID_RE = re.compile(r"(# graph id: )\d+")
_HARNESS = re.compile(r"\n(?:def get_args\(|def benchmark_compiled_module\(|if __name__ == )")
COLLECTIVE_TARGET = ("_c10d_functional", "c10d", "_c10d_functional_autograd")
UNREAD = "not read"  # a refused file's place in a fingerprint: equal to no content hash
# a graph whose id (from the manifest) is no plain folder name: never looked up (it names
# neither the same nor a different graph); its id is quoted where it is listed
UNSAFE_ID = "its graph id is not a plain folder name; not read"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def normalise_text(text: str) -> str:
    """``text`` with every absolute path reduced to its file name, every accelerator's
    index left out (``cuda:1`` -> ``cuda:N``) and a printed graph's object id: what differs
    between ranks that agree."""
    text = _GRAPH_ID_RE.sub(r"\1N", _DEVICE_RE.sub(r"\1:N", _PATH_RE.sub(r"\1", text)))
    return _DEVICE_CALL_RE.sub(r"\1N\2", _DEVICE_INDEX_RE.sub(r"\1N\2", text))


def without_groups(text: str, groups: frozenset[str]) -> str:
    """A snapshot with the process-group names its collective nodes pass (``"0"`` in
    ``all_reduce(y, "sum", "0")``) as ``<group>``: ranks of two tensor-parallel groups issue the
    same graph on their own groups (which groups, and who is in them, collectives.json
    compares, per pair of ranks)."""
    try:
        data = safefile.loads(text)
    except ValueError:
        return text
    nodes = data.get("nodes") if isinstance(data, dict) else None
    for n in nodes if isinstance(nodes, list) else []:
        if isinstance(n, dict) and str(n.get("target") or "").startswith(COLLECTIVE_TARGET):
            for key in ("args", "kwargs"):
                v = n.get(key)
                if isinstance(v, list):
                    n[key] = ["<group>" if isinstance(x, str) and x in groups else x for x in v]
                elif isinstance(v, dict):
                    n[key] = {k: "<group>" if isinstance(x, str) and x in groups else x
                              for k, x in v.items()}
    return json.dumps(data, sort_keys=True)


class GraphPrint(TypedDict, total=False):
    id: str
    kind: str
    status: str
    stages: list[list[str | None]]  # [snapshot file name (.json or .txt), normalised hash]
    code: str | None
    collectives: str | None  # the collective sequence's hash (None: it issues none; UNREAD)
    unreadable: bool  # never read outside the rank's trace
    unread: list[str]  # files of the graph refused (relative to its folder): not compared


class Unread(TypedDict):
    """A file of a rank's trace that was not compared: ``file`` relative to the trace, ``why``
    (safefile's reason)."""

    file: str
    why: str


class CompilePrint(TypedDict):
    id: str
    cache: dict[str, dict[str, int]]
    graphs: list[GraphPrint]


class RankPrint(TypedDict):
    config: str | None
    compiles: list[CompilePrint]
    unread: list[Unread]  # not in the group key (rank_groups): reasons name sizes, which
    # differ per rank


@dataclass
class RankDigest:
    """What the analysis knows of one rank without opening its trace."""

    rank: int
    manifest: Manifest
    status: str  # the trace's status now (a ``running`` one whose writer is gone: crashed)
    print: RankPrint
    compile_seconds: dict[str, float] = field(default_factory=dict)  # per compile id
    inductor_seconds: dict[str, float] = field(default_factory=dict)  # of it, Inductor's

    @property
    def graphs(self) -> int:
        return sum(len(c["graphs"]) for c in self.print["compiles"])


class Hashes:
    """Normalised content hashes of the files of one analysis: per distinct content (and per
    hard-linked file: device, inode, size, mtime, name, groups) computed once."""

    def __init__(self) -> None:
        self._by_content: dict[bytes, str] = {}
        self._by_inode: dict[tuple[Any, ...], str] = {}
        self._collectives: dict[bytes, tuple[str | None, frozenset[str]]] = {}

    def file(self, path: str, name: str, st: os.stat_result | None = None,
             groups: frozenset[str] = frozenset(),
             unread: dict[str, str] | None = None) -> str | None:
        """The normalised content hash of a file of a rank's trace (``groups``: the
        process-group names of the graph's collectives, left out of a snapshot's collective
        nodes); None when there is none; ``UNREAD`` when safefile refuses it (why, by its path,
        in ``unread``). ``path`` may hold ``name`` compressed (``NAME.gz``): what it holds is
        hashed, so a rank that stored it plain hashes the same."""
        try:
            st = st or os.stat(path, follow_symlinks=False)
        except OSError:
            return None
        linked = st.st_nlink > 1 and stat.S_ISREG(st.st_mode)
        same = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, name, groups)
        if linked and same in self._by_inode:
            return self._by_inode[same]
        try:  # a FIFO never blocks, a huge (sparse) file is not read
            raw, _ = safefile.read_bytes(path, safefile.MAX_JSON_BYTES, no_link=True)
        except safefile.Refused as e:  # not compared: neither the same nor different
            if unread is not None:
                unread[path] = str(e)
            return UNREAD
        except OSError:
            return None
        key = hashlib.sha256(name.encode() + b"\0" + "\0".join(sorted(groups)).encode()
                             + b"\0" + raw).digest()
        if key not in self._by_content:
            if path.endswith(compressed.SUFFIX):
                try:
                    raw, _ = compressed.inflate(raw, safefile.MAX_JSON_BYTES)
                except safefile.Refused as e:  # a decompression bomb: as a refused file
                    if unread is not None:
                        unread[path] = str(e)
                    return UNREAD
                except ValueError as e:  # damaged (a rank's copy cut short): not compared,
                    # as a refused file is; hashed, it made a divergence of a bad copy
                    if unread is not None:
                        unread[path] = f"damaged compressed file ({e})"
                    return UNREAD
            text = raw.decode("utf-8", errors="replace")
            if name == "wrapper.py":  # its benchmark harness uses this rank's size hints
                text = _HARNESS.split(text, 1)[0]
            if groups:
                text = without_groups(text, groups)
            self._by_content[key] = digest(normalise_text(text).encode())
        if linked:
            self._by_inode[same] = self._by_content[key]
        return self._by_content[key]

    def collectives(self, path: str,
                    unread: dict[str, str] | None = None) -> tuple[str | None, frozenset[str]]:
        """A graph's ``collectives.json``: the hash of its sequence and its group names
        (``UNREAD`` when safefile refuses it: why, by its path, in ``unread``)."""
        try:
            raw, _ = safefile.read_bytes(path, safefile.MAX_JSON_BYTES, no_link=True)
        except safefile.Refused as e:
            if unread is not None:
                unread[path] = str(e)
            return UNREAD, frozenset()
        except OSError:  # missing (it issues none) or unreadable: nothing to compare
            return None, frozenset()
        key = hashlib.sha256(raw).digest()
        if key not in self._collectives:
            try:
                data = shapes.check("collectives", safefile.loads(raw), lambda m: None)
            except (UnicodeDecodeError, ValueError):
                data = None
            data = data if isinstance(data, dict) else {}
            seq = coll.sequence_hash_of(data)
            self._collectives[key] = (seq, frozenset(coll.group_names_of(data)) if seq
                                      else frozenset())
        return self._collectives[key]


def _scan(folder: str) -> list[os.DirEntry[str]]:
    """The entries of a folder that is not a symbolic link, by name; [] when there is none."""
    try:
        if stat.S_ISLNK(os.lstat(folder).st_mode):
            return []
        with os.scandir(folder) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []


def _lstat(e: os.DirEntry[str]) -> os.stat_result | None:
    try:
        return e.stat(follow_symlinks=False)
    except OSError:
        return None


def graph_print(root: Path, g: GraphEntry, hashes: Hashes,
                unread: dict[str, str] | None = None) -> GraphPrint:
    """``unread``: the files refused, by path, with why (filled)."""
    unread = {} if unread is None else unread
    fp: GraphPrint = {"id": g.id, "kind": g.kind, "status": g.status, "stages": [],
                      "code": None, "collectives": None}
    gdir = os.path.join(root, schema.GRAPHS_DIR, g.id)
    try:
        linked = any(stat.S_ISLNK(os.lstat(p).st_mode)
                     for p in (os.path.join(root, schema.GRAPHS_DIR), gdir))
    except OSError:
        linked = False  # no folder: its files hash as missing
    if not is_safe_name(g.id) or linked:
        fp["unreadable"] = True  # never read outside the rank's trace
        if is_safe_name(g.id):
            unread[gdir] = "its folder is reached through a symbolic link; not read"
        return fp
    before = set(unread)
    seq, groups = hashes.collectives(os.path.join(gdir, schema.COLLECTIVES), unread)
    fp["collectives"] = seq
    # the snapshot files in order (stages/NNN-<name>.json, and .txt: a graph as a log printed
    # it, which a lazily imported trace keeps until it is read), listed rather than read from
    # meta.json (it holds this rank's phase times); the stage's name is looked up for the two
    # ranks compared
    # (compressed or not: ``NAME.gz`` is named and hashed as ``NAME``)
    # one entry per snapshot: a plain file beside its .gz (a rank stopped between writing the
    # one and removing the other) is the one the reader reads, as tracefiles does
    snaps: dict[str, os.DirEntry[str]] = {}
    for e in _scan(os.path.join(gdir, schema.STAGES_DIR)):
        name = compressed.logical_name(e.name)
        if ((name.endswith(".json") or layout.is_fx_text(name))
                and (name not in snaps or e.name == name)):
            snaps[name] = e
    fp["stages"] = [[name, hashes.file(e.path, name, _lstat(e), groups, unread)]
                    for name, e in snaps.items()]
    parts = [e for e in _scan(os.path.join(gdir, "code")) if not e.name.endswith(".json")]
    if parts or os.path.isdir(os.path.join(gdir, "code")):
        fp["code"] = digest("".join(
            f"{e.name}:{hashes.file(e.path, e.name, _lstat(e), unread=unread)};"
            for e in parts).encode())
    refused = sorted(os.path.relpath(p, gdir) for p in set(unread) - before)
    if refused:
        fp["unread"] = refused
    return fp


def _compile_detail(root: Path, cid: str) -> dict[str, Any]:
    path = root / schema.COMPILES_DIR / f"{layout.safe_id(cid)}.json"
    try:
        data = safefile.loads(compressed.read_bytes(path, safefile.MAX_JSON_BYTES, no_link=True))
    except (OSError, ValueError):
        return {}
    checked = shapes.check("compile", data, lambda m: None)
    return checked if isinstance(checked, dict) else {}


def _counts(value: Any) -> dict[str, dict[str, int]] | None:
    """A summary's cache counts, ``{cache: {"hit": n, "miss": n}}``, checked; None if not one."""
    if not isinstance(value, dict):
        return None
    out: dict[str, dict[str, int]] = {}
    for name, c in value.items():
        if not isinstance(c, dict) or not all(isinstance(n, int) and not isinstance(n, bool)
                                              for n in c.values()):
            return None
        out[str(name)] = {str(k): n for k, n in c.items()}
    return out


def read_rank(rank: int, trace_dir: Path, hashes: Hashes) -> RankDigest:
    """Rank ``rank``'s digest from its trace folder ``trace_dir`` (a folder with a manifest,
    not a link: the caller checked)."""
    try:
        m: Manifest | None = Manifest.from_json(safefile.read_json(
            trace_dir / schema.MANIFEST, safefile.MAX_JSON_BYTES, no_link=True))
    except (OSError, ValueError):
        m = None
    entries = m.graphs if m is not None else None
    if m is None or entries is None:  # unreadable, or graphs found by scanning: the full reader
        t = Trace(trace_dir)
        m, entries = t.manifest, [GraphEntry(g.id, g.kind, g.compile_id, g.status)
                                  for g in t.graphs]
    by_compile: dict[str, list[GraphEntry]] = {}
    for g in entries:
        if is_safe_name(g.id):
            by_compile.setdefault(g.compile_id, []).append(g)
    compiles: list[CompilePrint] = []
    seconds: dict[str, float] = {}
    inductor: dict[str, float] = {}
    unread: dict[str, str] = {}
    for c in m.compiles:
        cid = c.get("id")
        if not isinstance(cid, str):
            continue
        summary = c.get("summary") if isinstance(c.get("summary"), dict) else {}
        s = safefile.number(summary.get("entire_frame_compile_time_s"))
        cache = _counts(summary.get("cache"))
        if cache is None or "entire_frame_compile_time_s" not in summary:
            detail = {**c, **_compile_detail(trace_dir, cid)}  # a trace from before the summary
            cache = cache_counts(detail) if cache is None else cache
            if s is None:
                s = safefile.number((detail.get("metrics") or {})
                                    .get("entire_frame_compile_time_s"))
        if s is not None:
            seconds[cid] = float(s)
            ind = safefile.number(summary.get("inductor_compile_time_s"))
            if ind is not None and 0 <= ind <= s:
                inductor[cid] = float(ind)
        compiles.append({"id": cid, "cache": cache,
                         "graphs": [graph_print(trace_dir, g, hashes, unread)
                                    for g in by_compile.get(cid, [])]})
    fp = {"config": hashes.file(str(trace_dir / schema.CONFIG), schema.CONFIG, unread=unread),
          "compiles": compiles}
    whole: RankPrint = {**fp,  # type: ignore[typeddict-item]
                        # by its logical name (``NAME.gz`` as ``NAME``: as the print names it)
                        "unread": [{"file": compressed.logical_name(os.path.relpath(p, trace_dir)),
                                    "why": why} for p, why in sorted(unread.items())]
                        + [{"file": f"{schema.GRAPHS_DIR}/{g.id!r}", "why": UNSAFE_ID}
                           for g in entries if not is_safe_name(g.id)]}
    return RankDigest(rank, m, live_status(m), whole, seconds, inductor)

