"""How the ranks of a job are grouped: by what of their fingerprints is compared. No torch.

A file that safefile refused on some rank (over 64 MiB, a symbolic link, a linked graph folder)
is compared on none: in the group key it is ``UNREAD`` on every rank, so a rank that could not
read it and one that could are one group when they agree in everything else ("ranks agree in
what was compared" is never shown beside two groups). The ranks that did read such a file are
still compared with one another (:func:`readers_differ`).
"""

from __future__ import annotations

import json

from tuidebug.trace.format import schema
from tuidebug.trace.jobs.rank_digest import UNREAD, CompilePrint, GraphPrint, RankPrint, digest



def refused(prints: list[RankPrint]) -> frozenset[str]:
    """Every file (relative to a rank's trace) that safefile refused on some rank."""
    return frozenset(u["file"] for p in prints for u in p.get("unread") or [])


def _covered(path: str, files: frozenset[str]) -> bool:
    """Whether ``path`` is a refused file, lies in a refused folder, or holds one (a graph's
    ``code``: one hash of its files)."""
    return any(path == f or path.startswith(f + "/") or f.startswith(path + "/") for f in files)


def _graph_files(g: GraphPrint) -> dict[str, str | None]:
    base = f"{schema.GRAPHS_DIR}/{g['id']}"
    out: dict[str, str | None] = {f"{base}/{schema.COLLECTIVES}": g.get("collectives"),
                                  f"{base}/code": g.get("code")}
    for name, h in g.get("stages") or []:
        out[f"{base}/{schema.STAGES_DIR}/{name}"] = h
    return out


def _masked(files_of: dict[str, str | None], files: frozenset[str],
            keep: frozenset[str]) -> dict[str, str | None]:
    return {k: UNREAD if files and k not in keep and _covered(k, files) else h
            for k, h in files_of.items()}


def compared(p: RankPrint) -> dict[str, str | None]:
    """What of a rank's print is compared, by path in its trace: the config, and per graph its
    collective sequence, generated code (``graphs/<id>/code``) and snapshots."""
    out: dict[str, str | None] = {schema.CONFIG: p["config"]}
    for c in p["compiles"]:
        for g in c["graphs"]:
            out.update(_graph_files(g))
    return out


def compile_key(c: CompilePrint, files: frozenset[str],
                keep: frozenset[str] = frozenset()) -> str:
    """A compile's hash with every file refused on some rank (``files``: :func:`refused`)
    ``UNREAD``, but those in ``keep`` (:func:`contested`), and the reasons (sizes) left out."""
    return digest(json.dumps([c["id"], c["cache"], [
        [g["id"], g["kind"], g["status"], bool(g.get("unreadable")),
         _masked(_graph_files(g), files, keep)] for g in c["graphs"]]], sort_keys=True).encode())


def group_key(p: RankPrint, files: frozenset[str], keep: frozenset[str] = frozenset()) -> str:
    """A rank's fingerprint as the ranks are grouped by it: a file refused on any rank is
    ``UNREAD`` on all (not compared: a rank that read it and one that could not are alike in
    it), unless it is in ``keep`` (:func:`contested`); the reasons are left out."""
    config = _masked({schema.CONFIG: p["config"]}, files, keep)[schema.CONFIG]
    return digest(json.dumps([config] + [compile_key(c, files, keep)
                                         for c in p["compiles"]]).encode())


def contested(prints: dict[int, RankPrint], files: frozenset[str]) -> dict[str, list[list[int]]]:
    """The files refused on some rank that the ranks which read them found different (ranks 1
    and 2 read a snapshot rank 0 could not, and they differ in it): per such file, the ranks
    by content (in rank order). Those files stay in the group key: the readers are not alike
    (and a rank that refused one is alike with none of them)."""
    seen: dict[str, dict[str, list[int]]] = {}
    for r, p in sorted(prints.items()) if files else []:
        for k, h in compared(p).items():
            if h not in (None, UNREAD) and _covered(k, files):
                seen.setdefault(k, {}).setdefault(h, []).append(r)
    return {k: list(by.values()) for k, by in sorted(seen.items()) if len(by) > 1}
