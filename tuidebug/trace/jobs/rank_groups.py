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


class Covered:
    """Whether a path is a refused file (``files``), lies in a refused folder, or holds one (a
    graph's ``code``: one hash of its files): looked up by the path's folders, so each path
    costs its depth, not a test against every refused file."""

    def __init__(self, files: frozenset[str]) -> None:
        self.files = files
        self._holding = {a for f in files for a in _folders(f)}

    def __call__(self, path: str) -> bool:
        return bool(self.files) and (path in self.files or path in self._holding
                                     or any(a in self.files for a in _folders(path)))


def _folders(path: str) -> list[str]:
    """``a/b/c`` -> ``a``, ``a/b``."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _graph_files(g: GraphPrint) -> dict[str, str | None]:
    base = f"{schema.GRAPHS_DIR}/{g['id']}"
    out: dict[str, str | None] = {f"{base}/{schema.COLLECTIVES}": g.get("collectives"),
                                  f"{base}/code": g.get("code")}
    for name, h in g.get("stages") or []:
        out[f"{base}/{schema.STAGES_DIR}/{name}"] = h
    return out


def _masked(files_of: dict[str, str | None], covered: Covered,
            keep: frozenset[str]) -> dict[str, str | None]:
    return {k: UNREAD if k not in keep and covered(k) else h for k, h in files_of.items()}


def compared(p: RankPrint) -> dict[str, str | None]:
    """What of a rank's print is compared, by path in its trace: the config, and per graph its
    collective sequence, generated code (``graphs/<id>/code``) and snapshots."""
    out: dict[str, str | None] = {schema.CONFIG: p["config"]}
    for c in p["compiles"]:
        for g in c["graphs"]:
            out.update(_graph_files(g))
    return out


def _compile_key(c: CompilePrint, covered: Covered, keep: frozenset[str]) -> str:
    return digest(json.dumps([c["id"], c["cache"], [
        [g["id"], g["kind"], g["status"], bool(g.get("unreadable")),
         _masked(_graph_files(g), covered, keep)] for g in c["graphs"]]], sort_keys=True).encode())


def rank_keys(p: RankPrint, covered: Covered, keep: frozenset[str] = frozenset()
              ) -> tuple[str, dict[str, str]]:
    """(the rank's group key, each compile's key by id): its print with every file refused on
    some rank (``covered``, of :func:`refused`) ``UNREAD`` on all (not compared: a rank that
    read it and one that could not are alike in it), but those in ``keep`` (:func:`contested`);
    the reasons (sizes) left out. Each compile is hashed once, for both."""
    config = _masked({schema.CONFIG: p["config"]}, covered, keep)[schema.CONFIG]
    keys = [(c["id"], _compile_key(c, covered, keep)) for c in p["compiles"]]
    return (digest(json.dumps([config] + [k for _, k in keys]).encode()), dict(keys))


def contested(prints: dict[int, RankPrint], covered: Covered) -> dict[str, list[list[int]]]:
    """The files refused on some rank that the ranks which read them found different (ranks 1
    and 2 read a snapshot rank 0 could not, and they differ in it): per such file, the ranks
    by content (in rank order). Those files stay in the group key: the readers are not alike
    (and a rank that refused one is alike with none of them)."""
    seen: dict[str, dict[str, list[int]]] = {}
    for r, p in sorted(prints.items()) if covered.files else []:
        for k, h in compared(p).items():
            if h not in (None, UNREAD) and covered(k):
                seen.setdefault(k, {}).setdefault(h, []).append(r)
    return {k: list(by.values()) for k, by in sorted(seen.items()) if len(by) > 1}
