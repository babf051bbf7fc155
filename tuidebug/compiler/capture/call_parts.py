"""A clocked compiled call as its parts (``--profile``'s ledger): Dynamo before the first
graph, each compiled graph, each eager island between two graphs, after the forward the
backward's graphs and islands, from the marks one clocked call took
(``whole_call.WholeCall._clocked_call``), and each part's share of the clocked calls' wall time
(:func:`shares`), and the ledger made of them (:func:`ledger`). No torch.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

BACKWARD = "(backward)"


Piece = tuple[str, str, str, str, float]  # part, graph, compile id, phase, seconds
Run = tuple[float, list[Piece]]  # a clocked call: wall, its parts


def shares(runs: list[Run], wall: float) -> list[tuple[tuple[str, ...], float]]:
    """Each part of the usual shape (all but a part's seconds: part, graph, compile id,
    phase) with its seconds: its mean share
    of the wall time over the clocked calls of that shape whose wall time is in the middle fifth
    (p40–p60), times ``wall``. Empty when no call was clocked."""
    runs = [(w, r) for w, r in runs if r and w > 0]
    if not runs:
        return []
    shapes = [tuple(x[:-1] for x in r) for _, r in runs]
    shape = max(set(shapes), key=shapes.count)  # the calls took one path: the usual one
    same = sorted((wr for wr, sh in zip(runs, shapes) if sh == shape), key=lambda wr: wr[0])
    lo, hi = int(len(same) * 0.4), max(int(len(same) * 0.6), int(len(same) * 0.4) + 1)
    middle = same[lo:hi]
    return [(key, statistics.fmean(r[i][-1] / w for w, r in middle) * wall)
            for i, key in enumerate(shape)]


@dataclass(frozen=True)
class Clocked:
    """One clocked call: its wall time (host clock), each mark's seconds after the first, each
    compiled graph's (graph id, compile id, start mark, end mark), the forward's and the call's
    end marks (the same mark when no backward runs)."""

    wall: float
    seconds: list[float]
    graphs: list[tuple[str, str, int, int]]
    fwd_end: int
    end: int
    backward: list[tuple[str, int, int]]  # per compiled graph's backward: (compile id, marks)


def parts(c: Clocked, cudagraphs: set[str], training: bool) -> list[Piece]:
    """One clocked call as its parts, in order."""
    if not c.graphs:
        return []
    sec = c.seconds
    clock = [(g, cid, sec[a], sec[b]) for g, cid, a, b in c.graphs]
    out: list[Piece] = [("dynamo", "", "", "fwd", clock[0][2])]
    for i, (gid, cid, g0, g1) in enumerate(clock):
        out.append(("cudagraph" if gid in cudagraphs else "graph", gid, cid, "fwd", g1 - g0))
        if i + 1 < len(clock):
            out.append(("eager_island", "", cid, "fwd", clock[i + 1][2] - g1))
    # from the last graph's end to the forward's: Dynamo's frame returning, the module's and
    # AOTAutograd's wrappers handing back the outputs — and, when the last graph's compile
    # ended at a graph break whose rest was not compiled, that rest, run eagerly: an island
    # named by the compile (the reading resolves it to the break, or to Dynamo without one)
    out.append(("eager_island", "", clock[-1][1], "fwd", sec[c.fwd_end] - clock[-1][3]))
    if training:
        out += _backward_parts(c)
    return out


def _backward_parts(c: Clocked) -> list[Piece]:
    """The backward of a clocked training step: each compiled graph's backward as the autograd
    engine ran it, and the eager backward between them (the backward of the eager island the
    forward ran between those two graphs: its break is the earlier forward graph's compile,
    the one whose backward runs next), before the first and after the last (the engine, the
    eager backward of code outside the graphs). One lump when no backward was marked."""
    sec = c.seconds
    bwd = sorted(((cid, sec[a], sec[b]) for cid, a, b in c.backward if a >= 0),
                 key=lambda x: x[1])
    if not bwd:
        return [("graph", BACKWARD, "", "bwd", sec[c.end] - sec[c.fwd_end])]
    out: list[Piece] = [("eager_island", "", "", "bwd", bwd[0][1] - sec[c.fwd_end])]
    for i, (cid, b0, b1) in enumerate(bwd):
        out.append(("graph", "", cid, "bwd", b1 - b0))
        if i + 1 < len(bwd):
            out.append(("eager_island", "", bwd[i + 1][0], "bwd", bwd[i + 1][1] - b1))
    out.append(("eager_island", "", "", "bwd", sec[c.end] - bwd[-1][2]))
    return out


def ledger(runs: list[Run], wall: float, graphs: list[Any]) -> list[dict[str, Any]]:
    """The call's parts, as shares of the clocked calls' own wall time scaled to ``wall``
    (the timed calls' median): per part, its mean share over the clocked calls of the usual
    shape whose wall time is in the middle fifth (p40–p60). Shares, not seconds: a clocked
    call may run slower or faster than the timed ones (its marks' own cost, the machine's
    moment), yet splits its own time as they do. ``other`` is ``wall`` less the others:
    the clocked calls' time that no mark covers (entering the call, the device's last
    work's wait), as a share of theirs. ``graphs``: the session's (``GraphState``)."""
    out: list[dict[str, Any]] = []
    for (part, graph, cid, phase), secs in shares(runs, wall):
        row: dict[str, Any] = {"part": part, "seconds": round(secs, 9)}
        if graph:
            row["graph"] = graph
        if cid:
            row["compile_id"] = cid
        if phase == "bwd":
            row["phase"] = "bwd"
            if part == "graph":  # the compile's backward graph(s), or all of them
                row["graph"] = ",".join(_backward_ids(
                    graphs, None if graph == BACKWARD else cid)) or None
        elif part == "graph":
            row["reason"] = _skipped(graphs, graph)
        out.append({k: v for k, v in row.items() if v is not None})
    out.append({"part": "other", "seconds": round(wall - sum(p["seconds"] for p in out), 9)})
    return out


def _skipped(graphs: list[Any], graph: str) -> str | None:
    """Why Inductor did not capture graph ``graph`` as a CUDA graph, when it was on."""
    for g in graphs:
        if g.graph_id == graph and g.cudagraphs.get("enabled") and g.cudagraphs.get("skipped"):
            return f"CUDA graphs skipped: {str(g.cudagraphs['skipped'][0])[:200]}"
    return None


def _backward_ids(graphs: list[Any], cid: str | None) -> list[str]:
    """The backward graphs of compile ``cid`` (of every compile: None)."""
    return [g.graph_id for g in graphs if g.kind == "backward"
            and (cid is None or g.compile_id == cid)]
