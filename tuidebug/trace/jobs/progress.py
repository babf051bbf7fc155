"""A rank's progress log, and who waits for whom when a job hangs. No torch.

While a rank of a distributed job runs, its capture child appends one JSON line to
``DIR/job/rank_<r>.progress.jsonl`` before each collective it issues (``{"event":
"collective", "op", "seq", "group", "line", ...}``) and one when the collective returned
(``{"event": "done", "seq", "group"}``). Each line is one ``write`` on a file opened with
``O_APPEND``, so a rank killed at any point (``--timeout``, the NCCL watchdog, SIGKILL) leaves
every line it wrote before; the last phase it reached is its trace's manifest (``phase``,
``current_graph``, rewritten atomically per phase).

Reading is for untrusted folders: only the last :data:`TAIL_BYTES` of the file are read, a
line that is not a JSON object is skipped, and values are checked for type.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from tuidebug.trace.jobs.ddp_steps import number_step, step_said
from tuidebug.trace.jobs.ends import ends, where_it_was
from tuidebug.trace.jobs.unlogged import Untold, rank_line, unlogged
from tuidebug.trace.jobs import job as joblayout
from tuidebug.trace.format import safefile
from tuidebug.trace.format.manifest import Manifest

TAIL_BYTES = 256 * 1024


def progress_path(root: Path, rank: int) -> Path:
    return root / joblayout.RECORDS_DIR / f"rank_{rank}.progress.jsonl"


def stacks_path(progress: Path) -> Path:
    """Where the rank of progress log ``progress`` dumps its Python stacks (every thread,
    ``faulthandler``'s text) when ``tuidebug trace --timeout`` asks it (SIGUSR1)."""
    return progress.with_name(progress.name.replace(".progress.jsonl", ".stacks.txt"))


class ProgressLog:
    """Appends events to one rank's progress log (one ``write`` per line, flushed by the OS on
    any exit of the process)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                          | getattr(os, "O_NOFOLLOW", 0), 0o644)

    def append(self, event: dict[str, Any]) -> None:
        self.append_line(json.dumps(event, default=str))

    def append_line(self, line: str) -> None:
        """One event already encoded as a JSON object (no newline)."""
        try:
            os.write(self.fd, (line + "\n").encode())
        except OSError:
            pass  # a full disk must not stop the rank

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


def events(path: Path) -> list[dict[str, Any]]:
    """The events of a progress log: a regular file inside the job folder (not a link, a FIFO
    or a folder), its last TAIL_BYTES, each line parsed with bounded nesting."""
    return read_log(path)[0]


def read_log(path: Path) -> tuple[list[dict[str, Any]], Untold | None]:
    """The events of a progress log (:func:`events`) and why it tells nothing of the rank
    (None: it is read): no file, or one holding no event at all — the capture writes ``start``
    first, so a rank that logged nothing did not log its collectives —, or a file not read
    (refused: ``unread``; the rank may have logged). Such a rank did not issue "no
    collective": what it issued is not known."""
    if path.parent.is_symlink():  # job/ itself a link: a path out of the job folder
        return [], Untold("its job folder is a symbolic link", unread=True)
    try:
        data, size = safefile.read_tail(path, TAIL_BYTES)
    except FileNotFoundError:
        return [], Untold("no progress log")
    except safefile.Refused as e:  # says why itself ("a directory, not a regular file")
        return [], Untold(f"refused: {str(e)[:200]}", unread=True)
    except OSError as e:
        return [], Untold(f"{type(e).__name__}: {str(e)[:200]}", unread=True)
    lines = data.split(b"\n")
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first one is cut
    out = []
    for ln in lines:
        try:
            ev = safefile.loads(ln)
        except ValueError:  # bad JSON, too deep, an integer too long, not UTF-8
            continue
        if isinstance(ev, dict):
            out.append(ev)
    return out, None if out else Untold("its progress log holds no event")


def _text(v: Any) -> str | None:
    return str(v)[:300] if isinstance(v, (str, int, float)) else None


MAX_MEMBERS = 1 << 16
MAX_LISTED = 1024  # group members kept as a list (a longer list: not used, as if not given)
MAX_GROUPS = 256  # groups whose highest collective (and DDP step) a rank's log is read for


def _members(v: Any) -> list[int] | dict[str, int] | None:
    """A collective's group members as logged: a list of global ranks (at most MAX_LISTED), or
    a long arithmetic run ``{"first", "step", "count"}`` kept as such (never expanded: 400
    ranks of 65,536 members each made ``info --json`` gigabytes); None when not given (every
    rank) or malformed."""
    if isinstance(v, list):
        return [m for m in v if type(m) is int] if len(v) <= MAX_LISTED else None
    if isinstance(v, dict):
        first, step, count = v.get("first"), v.get("step"), v.get("count")
        if all(type(x) is int for x in (first, step, count)) and step > 0 \
                and 0 < count <= MAX_MEMBERS and abs(first) < 1 << 31 and step < 1 << 31:
            return {"first": first, "step": step, "count": count}
    return None


def is_member(members: list[int] | dict[str, int] | None, rank: int) -> bool:
    """Is ``rank`` in the group (``members`` as :func:`_members` keeps them; None: every rank)."""
    if members is None:
        return True
    if isinstance(members, dict):
        k, off = divmod(rank - members["first"], members["step"])
        return off == 0 and 0 <= k < members["count"]
    return rank in members


def _op_kind(op: str) -> str:
    """send and recv of one pair of ranks are the two sides of one exchange, not a mismatch."""
    return "send/recv" if op in ("send", "recv") else op


def _compiled(v: Any) -> dict[str, Any] | None:
    """Where compiled code issued a collective: its graph, index in it, wrapper line."""
    if not isinstance(v, dict):
        return None
    out = {"graph": _text(v.get("graph"))}
    for k in ("index", "wrapper_line"):
        out[k] = v[k] if isinstance(v.get(k), int) and not isinstance(v[k], bool) else None
    return out


def _ddp(v: Any) -> dict[str, Any] | None:
    """A bucket all-reduce of DDP's reducer: the bucket's index, whether it is the last, its
    bytes."""
    if not isinstance(v, dict) or type(v.get("bucket")) is not int:
        return None
    return {"bucket": v["bucket"], "last": v.get("last") is True,
            "bytes": v["bytes"] if type(v.get("bytes")) is int else None}


def last_collective(path: Path, logged: list[dict[str, Any]] | None = None
                    ) -> dict[str, Any] | None:
    """The collective the rank's log says it is in, else its last one: op, seq, group, line,
    ``compiled`` (issued by a compiled graph's wrapper: graph, index, wrapper line) and
    ``state`` — ``waiting`` (entered, never left: the rank is in it, or in its wait) or
    ``done``; ``reached``: per group, the highest number the log shows the rank issued (an
    asynchronous collective returns at once: the rank reached it, though it may wait for it
    later). Only the rank's last attempt counts: a restarted rank logs ``start`` again and
    numbers its collectives anew. In DDP's bucket all-reduces (all issued, then waited for
    together) the rank is in the earliest that never completed of its last DDP step (``ddp``'s
    ``step``: a step's buckets run from bucket 0 to the one marked last; ``ddp_steps``: per
    group, the last step the rank entered). A bucket of an earlier step whose completion the
    log lacks is not where it waits: the reducer waits for every bucket of a backward before
    the next one starts. ``logged``: the log's events, already read."""
    last: dict[str, Any] | None = None
    reached: dict[str, int] = {}
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    waiting_in: dict[str, Any] | None = None
    steps: dict[str, int] = {}  # per group: the DDP step its last bucket belongs to
    prev: dict[str, dict[str, Any]] = {}  # per group: its last DDP bucket
    for ev in events(path) if logged is None else logged:
        kind = ev.get("event")
        if kind == "start":  # a new attempt (torchrun --max-restarts): numbered anew
            last, reached, seen, waiting_in, steps, prev = None, {}, {}, None, {}, {}
        elif kind == "collective" and isinstance(ev.get("seq"), int):
            group = _text(ev.get("group")) or "default"
            if group in reached or len(reached) < MAX_GROUPS:
                reached[group] = max(reached.get(group, 0), ev["seq"])
            last = seen[(group, ev["seq"])] = {
                "op": _text(ev.get("op")) or "?", "seq": ev["seq"], "group": group,
                "line": _text(ev.get("line")), "async": ev.get("async") is True,
                "members": _members(ev.get("members")), "compiled": _compiled(ev.get("compiled")),
                "ddp": _ddp(ev.get("ddp")), "state": "waiting", "reached": reached,
                "ddp_steps": steps}
            if last["ddp"] is not None and (group in steps or len(steps) < MAX_GROUPS):
                number_step(last["ddp"], group, steps, prev)  # groups past the cap: no step
        elif (kind == "done" and last is not None and ev.get("seq") == last["seq"]
              and _text(ev.get("group")) == last["group"]):
            last["state"] = "done"
            if last["ddp"]:  # a DDP bucket's done: its all-reduce completed, not only issued
                last["waited"] = True
        elif kind == "done" and isinstance(ev.get("seq"), int):  # an earlier DDP bucket's
            c = seen.get((_text(ev.get("group")) or "default", ev["seq"]))
            if c is not None and c["ddp"]:
                c["state"], c["waited"] = "done", True
        elif kind in ("wait", "waited") and isinstance(ev.get("seq"), int):
            c = seen.get((_text(ev.get("group")) or "default", ev["seq"]))
            if c is not None:
                c["state"] = "waiting" if kind == "wait" else "done"
                c["in_wait"] = kind == "wait"
                c["waited"] = kind == "waited"  # completed, not only issued
                waiting_in = c if kind == "wait" else None
    if waiting_in is not None and (last is None or last["state"] != "waiting"):
        return waiting_in  # issued earlier, waited for now (compiled code's wait_tensor)
    if last is not None and last["ddp"] and last["state"] == "waiting" \
            and "step" in last["ddp"]:
        # DDP's reducer issues its buckets' all-reduces one after another and waits for them
        # all: the rank waits first in the earliest of its last step that never completed
        step = last["ddp"]["step"]
        return next((c for c in seen.values() if c["ddp"] and c["state"] == "waiting"
                     and c["group"] == last["group"] and c["ddp"].get("step") == step), last)
    return last


_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen", "/tuidebug/")
# Inductor's generated modules (its cache folder, a file named for its hash): compiled code
_GENERATED_RE = re.compile(r"torchinductor|(^|/)c[a-z0-9]{40,}\.py$")
# torch's distributed code, whose C++ side issues collectives the progress log cannot see
# (DDP's forward: its bucket rebuild and buffer broadcast)
_DISTRIBUTED = ("/torch/distributed/", "/torch/nn/parallel/")
_FRAME_RE = re.compile(r'^\s+File "(.*)", line (\d+) in (\S+)\s*$')
_THREAD_RE = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+)")


def read_stacks(path: Path) -> list[dict[str, Any]] | None:
    """A rank's stack dump (faulthandler's text: every thread, innermost frame first): per
    thread ``id``, ``current`` (the one the signal interrupted), ``frames`` [{file, line, fn}].
    None when there is none; read as untrusted (a regular file, its last TAIL_BYTES)."""
    if path.parent.is_symlink():
        return None
    try:
        data, _ = safefile.read_tail(path, TAIL_BYTES)
    except (safefile.Refused, OSError):
        return None
    threads: list[dict[str, Any]] = []
    for ln in data.decode("utf-8", "replace").splitlines():
        if len(ln) > 2000:  # no line of faulthandler's is this long
            continue
        m = _THREAD_RE.match(ln)
        if m:  # a later dump starts again
            if threads and any(t["id"] == m.group(2) for t in threads):
                threads = []
            threads.append({"id": m.group(2), "current": m.group(1) == "Current thread",
                            "frames": []})
        elif threads and (f := _FRAME_RE.match(ln)):
            threads[-1]["frames"].append({"file": f.group(1)[:500], "line": int(f.group(2)),
                                          "fn": f.group(3)[:200]})
    return threads or None


def _where(frame: dict[str, Any]) -> str:
    return f"{os.path.basename(frame['file'])}:{frame['line']} ({frame['fn']})"


def stack_summary(threads: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The main thread's innermost frame and innermost user frame (not in the standard
    library, site-packages or tuidebug), as ``file.py:LINE (function)``."""
    if not threads:
        return None
    main = next((t for t in threads if t["frames"] and
                 t["frames"][-1]["file"].endswith("run_script.py")), None) or next(
        (t for t in threads if t["current"]), threads[-1])
    frames = main["frames"]
    user = next((f for f in frames if not any(x in f["file"] for x in _LIBRARY)
                 and not _GENERATED_RE.search(f["file"])), None)
    inside = frames[:frames.index(user)] if user else frames
    dist = next((f for f in inside if any(x in f["file"] for x in _DISTRIBUTED)), None)
    return {"threads": len(threads), "innermost": _where(frames[0]) if frames else None,
            "user": _where(user) if user else None,
            "distributed": _where(dist) if dist else None,
            "main": [_where(f) for f in frames[:40]]}


def rank_progress(root: Path, rank: int, manifest: Manifest | None) -> dict[str, Any]:
    """How far rank ``rank`` got: its trace's last compile phase and graph (``phase`` is
    ``script`` once that graph was compiled: the rank ran on), and its last collective;
    ``unlogged`` (no log, an empty one) or ``unread`` (refused): why its log tells nothing
    (:func:`read_log`), where it does not."""
    m = manifest or Manifest()
    graph, phase = _text(m.current_graph), _text(m.phase)
    status = next((e.status for e in m.graphs or [] if e.id == graph), None)
    logged, why = read_log(progress_path(root, rank))
    out = {"phase": "script" if phase and status in ("ok", "failed") else phase,
           "compile_phase": phase, "graph": graph, "graph_status": _text(status),
           "collective": last_collective(progress_path(root, rank), logged),
           "stack": stack_summary(read_stacks(stacks_path(progress_path(root, rank))))}
    if why is not None:
        out["unread" if why.unread else "unlogged"] = why.why
    return out


def _reached(c: dict[str, Any] | None, group: str) -> int:
    n = ((c or {}).get("reached") or {}).get(group)
    return n if isinstance(n, int) else 0


def _c(c: dict[str, Any]) -> str:
    """``all_reduce #3 (rank_job.py:40)``; issued by compiled code: ``all_reduce #3 of graph
    0_0-inference (collective 0 in it, wrapper line 110, rank_job.py:40)``; by DDP's reducer:
    ``DDP all_reduce bucket #1 (all_reduce #4 of group default, train.py:30)``."""
    k, ddp = c.get("compiled"), c.get("ddp")
    if ddp:  # issued by DDP's reducer from its autograd hooks
        return (f"DDP {c['op']} bucket #{ddp['bucket']} ({c['op']} #{c['seq']} of group "
                f"{c['group']}" + (f", {c['line']})" if c.get("line") else ")"))
    if not k:
        return f"{c['op']} #{c['seq']}" + (f" ({c['line']})" if c.get("line") else "")
    parts = [f"collective {k['index']} in it" if k.get("index") is not None else None,
             f"wrapper line {k['wrapper_line']}" if k.get("wrapper_line") else None, c.get("line")]
    inside = ", ".join(p for p in parts if p)
    return (f"{c['op']} #{c['seq']} of graph {k.get('graph') or '?'}"
            + (f" ({inside})" if inside else ""))


def _issued_ahead(stuck: list[dict[str, Any]], lines: list[str]) -> dict[str, Any] | None:
    """No rank is blocked in a collective call, but some issued a collective others did not
    reach: asynchronous collectives (NCCL, whose waits only make a GPU stream wait) leave the
    ranks blocked elsewhere (the next synchronising call), yet the job hangs on that one."""
    mismatches = []
    groups = {g for r in stuck for g in ((r["progress"].get("collective") or {})
                                         .get("reached") or {})}
    for group in sorted(groups):
        got = {r["rank"]: _reached(r["progress"].get("collective"), group) for r in stuck}
        members = next((c["members"] for r in stuck if (c := r["progress"].get("collective"))
                        and c.get("group") == group and c.get("members")), None)
        got = {rk: n for rk, n in got.items() if is_member(members, rk)}
        top = max(got.values(), default=0)
        ahead = sorted(rk for rk, n in got.items() if n == top)
        late = sorted(rk for rk, n in got.items() if n < top)
        if top and late:
            mismatches.append({
                "group": group, "seq": top, "kind": "issued_ahead", "ranks": ahead,
                "waits_for": late,
                "text": f"rank(s) {', '.join(map(str, ahead))} issued collective #{top} of "
                        f"group {group}, which rank(s) {', '.join(map(str, late))} did not "
                        "reach (issued asynchronously: the ranks wait where they synchronise)"})
    return {"lines": lines, "mismatches": mismatches, "waiting": {}} if mismatches else None


def waits(ranks: list[dict[str, Any]], missing: list[int] | None = None) -> dict[str, Any] | None:
    """Who waits for whom, from the ``progress`` of the ranks that did not finish (any status
    but ``ok``, ``failed``, ``script_failed``) and of those that failed because a collective
    timed out or were interrupted (``ends.where_it_was``): per group, the ranks in a collective and what they wait for; where each of them
    is (``lines``), also when none is in a collective the log records; ``ends``: how the ranks
    ended, as far as is known (``ends.py``; ``missing``: ranks with no record); ``hung``: some
    rank ran out of time — ``--timeout``, or its error says a collective timed out (the NCCL
    watchdog) — not ranks ``killed`` because another rank raised, nor ranks interrupted. None
    when every rank finished."""
    stuck = [r for r in ranks if where_it_was(r)
             and r.get("progress")]
    if not stuck:
        return None
    found_ends = ends(ranks, missing or [])
    hung = any(e.kind in ("timed_out", "collective_timeout") for e in found_ends)
    said = {"ends": [e.to_json() for e in found_ends]}
    lines, mismatches = [], []
    waiting: dict[str, dict[int, dict[str, Any]]] = {}
    blind = unlogged(ranks)  # no log: neither waiting nor behind as far as is known
    logged = [r for r in stuck if r["rank"] not in blind]  # the others' reach is known
    for r in stuck:
        p = r["progress"]
        c = p.get("collective")
        if c and c["state"] == "waiting":
            waiting.setdefault(c["group"], {})[r["rank"]] = c
            lines.append(f"rank {r['rank']} waits in {_c(c)}{step_said(r, c, logged)}")
        else:
            if p.get("phase") == "script":
                where = f"running the script (after compiling graph {p['graph']})"
            elif p.get("phase") and p.get("graph"):
                where = f"compiling graph {p['graph']}, phase {p['phase']}"
            elif p.get("phase"):  # Dynamo began a frame and no graph came of it (yet): a
                # frame it skips or runs eagerly sets no later phase, so not "compiling"
                where = (f"after the compiler's last step ({p['phase']}, no graph made of that "
                         "frame): in the compiler or running the script")
            else:
                where = "before compiling anything"
            if r["rank"] in blind:
                lines.append(rank_line(r["rank"], blind[r["rank"]], where))
                continue
            done = ("; no collective issued" if not c else
                    f"; its last collective {_c(c)} was issued asynchronously (it may wait for "
                    "it)" if c.get("async") and not c.get("waited") else
                    f"; its last collective {_c(c)} was waited for" if c.get("waited") else
                    f"; its last collective {_c(c)} returned")
            st = p.get("stack") or {}
            if st.get("user"):
                inner = (f"; innermost {st['innermost']}" if st.get("innermost")
                         and st["innermost"] not in (st["user"], st.get("distributed")) else "")
                outside = ("outside any collective" if not st.get("distributed") else
                           f"in torch.distributed code ({st['distributed']}), in no collective "
                           "the log records (one torch's C++ side issues, such as DDP's bucket "
                           "rebuild or buffer broadcast in its forward, is not logged)")
                lines.append(f"rank {r['rank']} is at {st['user']}{inner}, {outside}: "
                             f"{where}{done}")
                continue
            lines.append(f"rank {r['rank']} is in no collective: {where}{done}")
    unknown = next((e.ranks for e in found_ends if e.kind == "unknown"), [])
    if unknown:  # no record: where they were is not known, and never guessed
        shown = ", ".join(map(str, unknown[:20])) + (f" and {len(unknown) - 20} more"
                                                     if len(unknown) > 20 else "")
        lines.append(f"rank(s) {shown}: no record; where they were is not known")
    if not waiting:  # where each rank is, even when none is in a collective the log records
        found = _issued_ahead(logged, lines) or {"lines": lines, "mismatches": [], "waiting": {}}
        return {**found, "hung": hung, **said}
    for group, per in waiting.items():
        seqs = {c["seq"] for c in per.values()}
        members = next((c["members"] for c in per.values() if c.get("members")), None)
        top = max(c["seq"] for c in per.values())
        # a rank not waiting here is behind unless its log shows it issued #top of this group
        # (asynchronously, then waited elsewhere)
        behind = [r["rank"] for r in stuck if r["rank"] not in per and r["rank"] not in blind
                  and is_member(members, r["rank"])
                  and _reached(r["progress"].get("collective"), group) < top]
        if len(seqs) == 1 and len({_op_kind(c["op"]) for c in per.values()}) > 1:
            seq = seqs.pop()
            mismatches.append({
                "group": group, "seq": seq, "kind": "different_collectives",
                "ops": {str(rk): c["op"] for rk, c in sorted(per.items())},
                "text": f"collective #{seq} of group {group} differs between ranks: "
                        + ", ".join(f"rank {rk} {c['op']}" for rk, c in sorted(per.items()))
                        + " (a rank-dependent collective order)"})
        elif len(seqs) > 1 or behind:
            ahead = sorted(rk for rk, c in per.items() if c["seq"] == top)
            late = sorted(set(behind) | {rk for rk, c in per.items() if c["seq"] < top})
            mismatches.append({
                "group": group, "seq": top, "kind": "waits_for_ranks", "ranks": ahead,
                "waits_for": late,
                "text": f"rank(s) {', '.join(map(str, ahead))} wait in collective #{top} of "
                        f"group {group} for rank(s) {', '.join(map(str, late))}, which did not "
                        "reach it"})
    return {"lines": lines, "mismatches": mismatches, "hung": hung, **said,
            "waiting": {g: {str(rk): c for rk, c in per.items()} for g, per in waiting.items()}}
