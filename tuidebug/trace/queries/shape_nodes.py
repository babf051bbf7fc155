"""The FX nodes of a compile that a symbol or a user line names: the nodes whose value or shape
uses a symbol, the nodes whose source location is a user line, and, for a symbol created after
Dynamo (an unbacked symbol AOTAutograd or Inductor made again, with no user stack of its own),
the user line of the first node that uses it — marked as derived (``user_line_from``)."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

from tuidebug.trace.format.graph import Graph, Node
from tuidebug.trace.format.reader import GraphRecord, Trace
from tuidebug.trace.format.user_lines import user_line

_SYMBOL = re.compile(r"^[a-z]+\d+$")  # s77, u0, zuf0: sympy's names for sizes


def same_file(a: Any, b: Any) -> bool:
    """Whether two files of user lines are one: equal, or one the other's path shortened
    (Dynamo's guard comments name ``dir/model.py`` where a stack names ``/home/me/dir/model.py``)."""
    a, b = str(a or "").replace("\\", "/"), str(b or "").replace("\\", "/")
    if not a or not b:
        return False
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def nodes_at_line(graph: Graph | None, line: dict[str, Any] | None) -> list[str]:
    """The nodes of ``graph`` whose source location is ``line`` (``{file, line}``); not its
    inputs (Dynamo gives a placeholder the location of the input's first use)."""
    if graph is None or not isinstance(line, dict) or not isinstance(line.get("line"), int):
        return []
    return [n.name for n in graph.nodes if isinstance(n.source, dict) and n.op != "placeholder"
            and n.source.get("line") == line["line"] and same_file(n.source.get("file"),
                                                                   line.get("file"))]


def _uses(pattern: re.Pattern[str], node: Node) -> bool:
    meta = node.tensor if node.tensor is not None else node.tensors
    return meta is not None and bool(pattern.search(json.dumps(meta, default=str)))


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])")


def nodes_using(graph: Graph | None, symbol: dict[str, Any]) -> list[str]:
    """The nodes of ``graph`` whose value or shape (tensor meta) names ``symbol`` (an entry of
    ``symbols``) or the symbol it was replaced by."""
    if graph is None or not symbol.get("name"):
        return []
    patterns = [_word(n) for n in names(symbol)]
    return [n.name for n in graph.nodes if any(_uses(p, n) for p in patterns)]


def _snapshots(trace: Trace, cid: str) -> Iterator[tuple[GraphRecord, str, Graph]]:
    """The compile's graph snapshots: the Dynamo graph of each of its graphs, then each one's
    last (post-grad: what AOTAutograd and Inductor's passes made), each read when reached."""
    records = [g for g in trace.graphs if g.compile_id == cid]
    firsts = [(g, s) for g in records for s in g.snapshots()[:1]]
    lasts = [(g, s) for g in records for s in g.snapshots()[1:][-1:]]
    for g, s in firsts + lasts:
        graph = g.stage_graph(s)
        if graph is not None:
            yield g, s.name, graph


def names(sym: dict[str, Any]) -> list[str]:
    """The symbol's own name, then the symbols it was replaced by (an unbacked symbol made again
    after Dynamo is renamed to Dynamo's: ``u1`` → ``u0``; the graphs then show ``u0``)."""
    names = [str(sym["name"])]
    for token in re.findall(r"[A-Za-z_]\w*", str(sym.get("replaced_by") or "")):
        if _SYMBOL.match(token) and token not in names:
            names.append(token)
    return names


def derived_user_lines(trace: Trace, cid: str,
                       symbols: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """For each symbol with no user line: ``{"user_line", "user_line_from"}`` from the first
    FX node but an input (Dynamo graph first, then the post-grad graph) whose value or shape
    uses it, or the symbol it was replaced by, and whose source location is known."""
    pending = {str(s["name"]): [(n, _word(n)) for n in names(s)]
               for s in symbols if not s.get("user_line") and s.get("name")}
    found: dict[str, dict[str, Any]] = {}
    if not pending:
        return found
    for g, stage, graph in _snapshots(trace, cid):
        for node in graph.nodes:
            line = user_line(node.source)
            if line is None or node.op == "placeholder":
                continue
            for name, patterns in list(pending.items()):
                hit = next((n for n, p in patterns if _uses(p, node)), None)
                if hit is None:
                    continue
                via = f", which uses {hit} ({name} was replaced by {hit})" if hit != name else ""
                found[name] = {"user_line": line,
                               "user_line_from": f"node {node.name} of {g.id} ({stage}){via}"}
                del pending[name]
            if not pending:
                return found
    return found
