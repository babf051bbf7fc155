"""Chromium (``dynamo_timed``) events -> phase starts, pass timings and stage durations. No torch.

The log times the passes Inductor ran (``pass.post_grad_passes.<name>``) but holds no snapshot
between them: each becomes a stage of kind "pass" with its duration, placed before the next
snapshot, and says that whether it changed the graph is not in the log.
"""

from __future__ import annotations

from tuidebug.trace.importers.graphs import GraphBook, ImportedGraph
from tuidebug.trace.importers.records import Chromium
from tuidebug.trace.importers.segments import INDUCTOR_PHASES, SEG_START_CHROMIUM

STAGE_DURATION_EVENT = {"_recursive_pre_grad_passes": "pre_grad",
                        "_recursive_joint_graph_passes": "joint_graph_passes",
                        "_recursive_post_grad_passes": "post_grad"}
PASS_NOTE = ("not in this log: whether this pass changed the graph "
             "(trace with tuidebug to get per-pass snapshots)")


class Timings:
    def __init__(self, book: GraphBook) -> None:
        self.book = book
        self._pass_open: dict[tuple[str, str], float] = {}

    def event(self, ev: Chromium, cid: str, rec_index: int) -> None:
        book = self.book
        c = book.compile(cid)
        if cid not in book.segs.has_graph:
            if ev.ph == "B" and ev.phase is not None:
                c.last_phase = ev.phase
            return
        seg = book.segs.of_record.get(rec_index)
        if ev.name.startswith("pass."):
            if ev.pass_name is None:
                return
            subsystem, passname = ev.pass_name
            g = book.graph(cid, seg.kind or "inference", seg) if seg is not None \
                else book.frame_graph(cid)
            key = (g.id, ev.name)
            if ev.ph == "B":
                self._pass_open[key] = ev.ts
            elif ev.ph == "E" and key in self._pass_open:
                start = self._pass_open.pop(key)
                g.pending.append({"name": passname, "kind": "pass", "subsystem": subsystem,
                                  "duration_s": round(ev.ts - start, 6), "changed": None,
                                  "note": PASS_NOTE})
            return
        g: ImportedGraph
        if ev.phase in INDUCTOR_PHASES and seg is not None:
            g = book.graph(cid, seg.kind or "inference", seg)
        elif ev.phase is not None or ev.name in SEG_START_CHROMIUM:
            g = book.graph(cid, seg.kind or "inference", seg) if seg is not None \
                else book.frame_graph(cid)
        else:
            return
        if g.t0 is None:
            g.t0 = ev.ts
        if ev.ph == "B":
            if ev.phase is not None:
                g.set_phase(ev.phase, ev.ts)
                c.last_phase = ev.phase
                c.last_graph = g.id
            if ev.name in STAGE_DURATION_EVENT:
                c.open_events[f"{g.id}:{ev.name}"] = ev.ts
        elif ev.ph == "E" and ev.name in STAGE_DURATION_EVENT:
            start = c.open_events.pop(f"{g.id}:{ev.name}", None)
            if start is not None:
                stage = STAGE_DURATION_EVENT[ev.name]
                g.stage_durations[stage] = round(ev.ts - start, 6)
                for s in g.stages:
                    if s["name"] == stage and s.get("duration_s") is None:
                        s["duration_s"] = g.stage_durations[stage]
