"""The collectives a graph issues (``collectives.json``) and where two ranks' sequences of them
first differ. No torch.

Every rank must issue the same collectives in the same order with matching sizes, or the job
hangs (NCCL) or fails. What must match is the ``key`` of a collective: its op (the in-place and
functional forms of one collective are the same on the wire), its group (its name and ranks),
its reduce op / group size / source rank, and its input dtypes and shapes — except where ranks
may legitimately send different sizes (``all_to_all_single``'s uneven splits). Waits
(``wait_tensor``) complete a collective locally; they are listed, not compared.
"""

from __future__ import annotations

import json
from typing import Any

from tuidebug.trace.format.reader import GraphRecord

WAIT_OPS = ("wait_tensor",)
# ops whose per-rank sizes may differ in a correct program (uneven all-to-all splits)
_SIZES_MAY_DIFFER = ("all_to_all_single", "alltoall_base", "alltoall")
_PER_RANK_ARGS = ("output_split_sizes", "input_split_sizes")


def op_name(c: dict[str, Any]) -> str:
    """The collective an entry issues: ``all_reduce_`` and ``all_reduce`` are both
    ``all_reduce``; ``all_gather_into_tensor_out`` is ``all_gather_into_tensor``."""
    op = str(c.get("op") or "?")
    if op.endswith("_out"):
        op = op[:-4]
    return op.rstrip("_") or op


def issued(g: GraphRecord) -> list[dict[str, Any]]:
    """The collectives graph ``g`` issues, in program order, without the waits."""
    return issued_of(g.collectives)


def issued_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The collectives a graph's ``collectives.json`` (checked, parsed) lists as issued."""
    entries = data.get("collectives") or []
    return [c for c in entries if isinstance(c, dict) and c.get("op") not in WAIT_OPS]


def _group(c: dict[str, Any]) -> Any:
    """A group by name and ranks: two groups of the same ranks are two communicators (every rank
    makes its groups in the same order, so a name means the same group on every rank)."""
    ranks = c.get("group_ranks")
    return [c.get("group"), list(ranks) if isinstance(ranks, list) else None]


def _tensors(c: dict[str, Any]) -> list[str]:
    out = []
    for t in c.get("inputs") or []:
        if isinstance(t, dict):
            dims = t.get("shape")
            shape = ",".join(str(d) for d in dims) if isinstance(dims, list) else "?"
            out.append(f"{t.get('dtype')}[{shape}]")
        else:
            out.append("?")
    return out


def key(c: dict[str, Any]) -> list[Any]:
    """What must be the same on every rank for this collective to match."""
    op = op_name(c)
    args = {k: v for k, v in sorted((c.get("args") or {}).items()) if k not in _PER_RANK_ARGS}
    tensors = _tensors(c)
    if op in _SIZES_MAY_DIFFER:
        tensors = [t.split("[")[0] for t in tensors]
    return [op, _group(c), args, tensors]


def group_names(g: GraphRecord) -> list[str]:
    """The names of the process groups graph ``g``'s collectives use."""
    return group_names_of(g.collectives)


def group_names_of(data: dict[str, Any]) -> list[str]:
    groups = data.get("groups")
    names = [str(k) for k in groups] if isinstance(groups, dict) else []
    return names + [c["group"] for c in issued_of(data) if isinstance(c.get("group"), str)]


def sequence_hash_of(data: dict[str, Any]) -> str | None:
    """A hash of the collective sequence of a graph's ``collectives.json`` (checked, parsed);
    None when it issues none."""
    seq = [key(c) for c in issued_of(data)]
    if not seq:
        return None
    import hashlib  # only for a graph with collectives: not at every start-up

    return hashlib.sha256(json.dumps(seq, sort_keys=True, default=str).encode()).hexdigest()[:16]


def line_of(c: dict[str, Any]) -> dict[str, Any] | None:
    """The user line that issued the collective (else the innermost frame recorded)."""
    src = c.get("user_source") or c.get("source")
    return src if isinstance(src, dict) else None


def describe(c: dict[str, Any] | None) -> dict[str, Any] | None:
    """One collective as the divergence report shows it."""
    if c is None:
        return None
    src = line_of(c) or {}
    where = f"{src.get('file')}:{src.get('line')}" if src.get("file") else None
    return {"index": c.get("index"), "op": op_name(c), "target": c.get("target"),
            "group": c.get("group"), "group_ranks": c.get("group_ranks"),
            "args": c.get("args") or {}, "tensors": _tensors(c), "bytes": c.get("bytes"),
            "node": c.get("node"), "kernel": c.get("kernel"), "line": where,
            "code": src.get("code")}


ACROSS_GROUPS = "order across groups"
ACROSS_GROUPS_NOTE = ("each group's own sequence is the same on both ranks; only the order "
                      "between groups differs (it completes where each group progresses on its "
                      "own, as gloo's do; with NCCL it may deadlock)")


def _shared(cs: list[dict[str, Any]], ranks: tuple[int, int] | None,
            other: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The collectives of ``cs`` on a group holding both ``ranks``: a collective on a group one
    of the two is not in is matched by its own group's members, not by this pair. A group
    whose members are not recorded (an imported log names groups only) is taken to hold both
    when the ``other`` side issues on it too (a rank in it that never issues on it would hang
    it); else it is not compared (a tensor-parallel group of the other rank's own)."""
    if ranks is None:
        return cs
    theirs = {c.get("group") for c in other}
    out = []
    for c in cs:
        members = c.get("group_ranks")
        if isinstance(members, list):
            if all(r in members for r in ranks):
                out.append(c)
        elif c.get("group") in theirs:
            out.append(c)
    return out


def _per_group(cs: list[dict[str, Any]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for c in cs:
        k = key(c)
        out.setdefault(json.dumps(k[1], default=str), []).append(k)
    return out


def first_difference(a: GraphRecord, b: GraphRecord,
                     ranks: tuple[int, int] | None = None) -> dict[str, Any] | None:
    """Where graph ``b``'s collective sequence first differs from ``a``'s: the position, the
    collective on each side (None past the end of the shorter one), what differs, and the
    line that issued it; None when they match. ``ranks``: the ranks of ``a`` and ``b`` (only
    the collectives on groups holding both are compared). When every group's own sequence
    matches and only their interleaving differs, ``differs_in`` is ``[ACROSS_GROUPS]`` with
    ``note`` saying so."""
    xa, ya = issued(a), issued(b)
    xs, ys = _shared(xa, ranks, ya), _shared(ya, ranks, xa)
    across = _per_group(xs) == _per_group(ys)
    for i in range(max(len(xs), len(ys))):
        x = xs[i] if i < len(xs) else None
        y = ys[i] if i < len(ys) else None
        if x is not None and y is not None and key(x) == key(y):
            continue
        fields = (["a collective on one side only"] if x is None or y is None else
                  [name for name, p, q in zip(("op", "group", "arguments", "tensors"),
                                              key(x), key(y)) if p != q])
        issuer = line_of(y if y is not None else x) or {}  # type: ignore[arg-type]
        extra = {"note": ACROSS_GROUPS_NOTE} if across else {}
        return {"position": i, "counts": [len(xs), len(ys)],
                "differs_in": [ACROSS_GROUPS] if across else fields, **extra,
                "reference": describe(x), "diverging": describe(y),
                "line": (f"{issuer.get('file')}:{issuer.get('line')}"
                         if issuer.get("file") else None), "code": issuer.get("code")}
    return None


def autotune_winners(g: GraphRecord) -> list[list[Any]]:
    """Each autotuned op of the graph and the choice that won (what may differ per rank:
    benchmarks are timed on each rank's own device)."""
    return [[r.get("op"), r.get("winner")] for r in g.autotune if isinstance(r, dict)]
