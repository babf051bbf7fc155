"""Printed FX graphs (``GraphModule.print_readable`` text) -> the graph snapshot JSON shape.

TORCH_TRACE logs and TORCH_COMPILE_DEBUG folders hold graphs only as printed code::

    def forward(self, L_x_: "f32[4, 16][16, 1]cpu"):
        l_x_ = L_x_
        # File: /src/model.py:12 in forward, code: x = self.fc(x)
        linear: "f32[4, 8][8, 1]cpu" = torch._C._nn.linear(l_x_, w, b);  l_x_ = None
        return (linear,)

That text is Python, so it is parsed with :mod:`ast` (never executed) and each statement becomes
one node of :mod:`tuidebug.trace.format.graph`'s shape: name, op, target, args with ``{"node": NAME}``
references, the dtype/shape/stride/device of its annotation and the source line of the
``# File:`` comment above it. What print_readable does not print (module paths of call nodes,
``requires_grad``) stays empty. A truncated text is parsed up to the last complete statement and
``ParsedGraph.problems`` says so.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.format.graph import GRAPH_FORMAT
from tuidebug.trace.format.fx_annotations import parse_annotation
from tuidebug.trace.format.fx_builder import Builder, ann_text, slow_statement
from tuidebug.trace.format.fx_fastpath import (BINARY_RE, INPLACE_RE, SELF_ATTR_RE, STMT_RE,
                                               UNARY_RE, fast_statement, statement_value)
from tuidebug.trace.format import safefile

__all__ = ["GraphIndex", "ParsedGraph", "index_graph", "parse_annotation", "parse_graph"]

_FILE_RE = re.compile(
    r"#\s*File:\s*(?P<file>.+?):(?P<line>\d+) in (?P<fn>[^,]+), code: (?P<code>.*)$")
_NO_STACK = "No stacktrace found for following nodes"
_DEF_RE = re.compile(r"^(?P<indent>[^\S\n]*)def forward\(", re.M)

@dataclass
class ParsedGraph:
    nodes: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)  # 1-based lines of the text not read

    def to_json(self, graph_id: str = "", stage: str = "") -> dict[str, Any]:
        return {"format": GRAPH_FORMAT, "graph": graph_id, "stage": stage, "nodes": self.nodes}


def _forward_lines(text: str) -> tuple[list[str], int, int, int] | None:
    """The lines of the outermost module's ``def forward`` (from the ``def`` line to the end of
    its body: a nested module class, or the end of the text), the text's line index of the
    ``def``, its indentation and the index of the line that closes its signature."""
    m = _DEF_RE.search(text)
    if m is None:
        return None
    start = text.count("\n", 0, m.start())
    indent = len(m["indent"])
    rest = text[m.start():]
    lines = rest.split("\n")
    sig_end = _signature_end(lines, 0)
    # the body ends at a line indented no deeper than the "def": a character other than a blank
    # among its first indent + 1 (a blank line is skipped)
    body = sum(len(ln) + 1 for ln in lines[:sig_end + 1])
    end = _body_end(indent).search(rest, body - 1)  # from the newline that ends the signature
    if end is not None:
        del lines[sig_end + 1 + rest.count("\n", body, end.start() + 1):]
    return lines, start, indent, sig_end


def _body_end(indent: int) -> re.Pattern[str]:
    """The newline before a line with a character other than a blank among its first
    ``indent + 1`` (a pattern that starts with a newline is searched fast; ``re`` keeps the
    few indents met compiled)."""
    return re.compile(rf"\n(?=[^\S\n]{{0,{indent}}}\S)")


_SIG_TOKEN = re.compile(r"[\"'#()]")


def _signature_end(lines: list[str], start: int) -> int:
    """Index of the line that closes the ``def forward(`` parenthesis."""
    depth = 0
    for j in range(start, len(lines)):
        quote = ""
        for m in _SIG_TOKEN.finditer(lines[j]):
            ch = m.group()
            if quote:
                if ch == quote:
                    quote = ""
            elif ch in "\"'":
                quote = ch
            elif ch == "#":
                break
            elif ch == "(":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return j
    return len(lines) - 1


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == "\\":
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i].rstrip()
    return line


def _balance(text: str) -> int:
    depth = 0
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth


def _signature(lines: list[str], sig_end: int, indent: int,
               problems: list[str]) -> list[tuple[str, str | None]]:
    sig = [ln[indent:] if ln[:indent].strip() == "" else ln.lstrip()
           for ln in lines[: sig_end + 1]]
    plain = _plain_signature("\n".join(sig))
    if plain is not None:
        return plain
    text = "\n".join(sig) + "\n    pass\n"
    try:
        mod = ast.parse(text)
    except SyntaxError as e:
        problems.append(f"the graph's signature does not parse ({e.msg})")
        return []
    fn = next((s for s in mod.body if isinstance(s, ast.FunctionDef)), None)
    if fn is None:
        return []
    return [(a.arg, ann_text(a.annotation)) for a in fn.args.args if a.arg != "self"]


# what FX prints: "def forward(self, a: "ann", b):" on one line, or a parameter a line, each
# with a comment ("primals_1: "ann",  # PlainAOTInput(idx=0)"); anything else is read by ast
# (no two adjacent runs that can both take the same blanks, no '#' read twice: linear time on
# any text, a hostile one's million blanks included)
_SIG_COMMENT = re.compile(r'#[^"#\n]*$', re.M)
_PLAIN_SIG = re.compile(r'def forward\(\s*self((?:\s*,\s*[A-Za-z_]\w*(?:: "[^"\\\n]*")?)*)'
                        r"\s*(?:,\s*)?\):\s*")
_SIG_PARAM = re.compile(r'([A-Za-z_]\w*)(?:: "([^"\\\n]*)")?')


def _plain_signature(text: str) -> list[tuple[str, str | None]] | None:
    """The parameters (name, annotation) of a signature of the shape FX prints, as ast reads
    them (a few ms of ast for a model's hundreds of parameters); None for any other shape."""
    m = _PLAIN_SIG.fullmatch(_SIG_COMMENT.sub("", text) if "#" in text else text)
    if m is None:
        return None
    return [(p[1], p[2]) for p in _SIG_PARAM.finditer(m[1])]


@dataclass
class _Statements:
    """A printed graph cut into statements (multi-line ones joined), before any is read."""
    params: list[tuple[str, str | None]]
    stmts: list[tuple[int, str, dict[str, Any] | None]]  # (line, code, source of its nodes)
    bare: list[tuple[str, str | None]]  # "name: ann" placeholders (joint graphs' pytree inputs)
    first: int  # the text's line of "def forward"
    bad: list[int]
    problems: list[str]


def _statements(text: str) -> _Statements | None:
    problems: list[str] = []
    found = _forward_lines(text)
    if found is None:
        return None
    lines, first, indent, sig_end = found
    params = _signature(lines, sig_end, indent, problems)

    # (lineno, code, source) of each statement; multi-line statements joined
    stmts: list[tuple[int, str, dict[str, Any] | None]] = []
    source: dict[str, Any] | None = None
    acc: list[str] = []
    acc_depth = 0
    acc_line = 0
    acc_src: dict[str, Any] | None = None
    bad: list[int] = []
    # each "# File:" comment read once (a 24-layer model's layers repeat the same lines): its
    # source, or None when it does not say one
    comments: dict[str, dict[str, Any] | None] = {}
    for idx in range(sig_end + 1, len(lines)):
        s = lines[idx].strip()
        if not s:
            continue
        if acc:
            part = _strip_comment(s) if "#" in s else s
            acc.append(part)
            acc_depth += _balance(part)
            if acc_depth <= 0:
                stmts.append((acc_line, " ".join(acc), acc_src))
                acc = []
            continue
        if s[0] == "#":
            if "File:" in s:
                said = comments.get(s, _UNREAD)
                if said is _UNREAD:
                    said = comments[s] = _file_comment(s)
                if said is not None:
                    source = said
            elif _NO_STACK in s:
                source = None
            continue
        code = _strip_comment(s) if "#" in s else s
        if code.endswith(("(", "[", "{", ",")):
            depth = _balance(code)
            if depth > 0:
                acc, acc_depth, acc_line, acc_src = [code], depth, idx + 1, source
                continue
        stmts.append((idx + 1, code, source))
    if acc:
        bad.append(acc_line)
    bare: list[tuple[str, str | None]] = []
    for _, code, _src in stmts:
        if " = " not in code and not code.startswith("return") and ": " in code:
            m = STMT_RE.match(code)
            if m:
                bare.append((m["name"], m["ann"]))
    return _Statements(params, stmts, bare, first, bad, problems)


_UNREAD: dict[str, Any] = {}


def _file_comment(line: str) -> dict[str, Any] | None:
    m = _FILE_RE.search(line)
    if m is None:
        return None
    return {"file": m["file"], "line": safefile.to_int(m["line"], 0), "fn": m["fn"].strip(),
            "code": m["code"].strip()}


def parse_graph(text: str) -> ParsedGraph:
    """Parse one printed FX graph. Never raises: problems are returned with what was parsed."""
    st = _statements(text)
    if st is None:
        return ParsedGraph([], ["no 'def forward' in the graph text"])
    problems, bad = st.problems, st.bad
    b = Builder()
    param_names = {p for p, _ in st.params}
    # joint graphs take pytree containers (primals, tangents); the real placeholders are the
    # annotated names flattened out of them
    for name, ann in st.bare or st.params:
        b.placeholder(name, ann)

    for lineno, code, src_loc in st.stmts:
        try:
            if not fast_statement(b, code, lineno, src_loc, param_names):
                slow_statement(b, code, lineno, src_loc, param_names, bad)
        except Exception:
            bad.append(lineno)
    bad_lines = sorted({x + st.first for x in bad})
    if bad:
        problems.append(
            f"graph text is truncated or corrupt: {len(bad_lines)} statement(s) could not be "
            f"read (at its line {', '.join(map(str, bad_lines[:5]))}); the rest was kept")
    return ParsedGraph(b.finish(), problems, bad_lines)


@dataclass
class GraphIndex:
    """What a printed graph says without building its nodes: how many nodes it has and the
    source line of each (not a placeholder) that has one, as ``parse_graph`` would give them."""
    nodes: int
    sources: dict[str, dict[str, Any]]


_CALL_RE = re.compile(r"^[A-Za-z_][\w.]*\(.*\)$")
_SUBSCRIPT_RE = re.compile(r"^[A-Za-z_]\w*\[.*\]$")
# "name: ann = target(args)" or "name = x[…]", then FX's "a = b = None": one node, as the
# checks below find it (no ";" in the value: the value ends where the first ";  " is)
_NODE_STMT_RE = re.compile(r'^([A-Za-z_]\w*)(?:: "[^"]*")? = '
                           r"(?:[A-Za-z_][\w.]*\([^;]*\)|[A-Za-z_]\w*\[[^;]*\])"
                           r"(?:;  (?:[A-Za-z_]\w* = )+None)?$")
_UNPACK_RE = re.compile(r"^[A-Za-z_]\w*(?:, ?[A-Za-z_]\w*)*,? = ")  # "a, b, = tree_flatten…"


def index_graph(text: str) -> GraphIndex | None:
    """The node count and node sources of a printed graph, read from its statements' shapes
    (about 10x faster than ``parse_graph``). None when the text has a statement of any other
    shape, or a problem ``parse_graph`` would report: then parse it."""
    st = _statements(text)
    if st is None or st.bad or st.problems:
        return None
    # placeholders that a statement may rename ("l_x_ = L_x_"); a joint graph's pytree
    # containers are not nodes
    names = set() if st.bare else {p for p, _ in st.params}
    nodes = len(st.bare or st.params)
    sources: dict[str, dict[str, Any]] = {}
    stmt_match, call_match, node_match = STMT_RE.match, _CALL_RE.match, _NODE_STMT_RE.match
    for _, code, src in st.stmts:
        m = node_match(code)  # the common statement: one regex says it all
        if m is not None:
            nodes += 1
            if src is not None:
                sources[m[1]] = src
            continue
        m = stmt_match(code)
        if m is None:
            if code.startswith("return ") or code == "return":
                nodes += 1  # the output node
            elif (m := INPLACE_RE.match(code)) is not None:  # "x += 1;  name = x"
                nodes += 1
                if src is not None:
                    sources[m["name"]] = src
            elif not _UNPACK_RE.match(code):
                return None
            continue
        rhs = m["rhs"]
        if rhs is None:
            if m["ann"] is None:
                return None
            continue  # a bare placeholder, counted above
        if ";  " in rhs:
            rhs = statement_value(rhs)
            if rhs is None:
                return None
        if rhs == "None":
            continue
        name = m["name"]
        if rhs in names and m["ann"] is None:
            names.discard(rhs)  # "l_x_ = L_x_": a placeholder renamed
            continue
        if not (call_match(rhs) or _SUBSCRIPT_RE.match(rhs) or BINARY_RE.match(rhs)
                or UNARY_RE.match(rhs) or SELF_ATTR_RE.match(rhs)):
            return None
        nodes += 1
        if src is not None:
            sources[name] = src
    return GraphIndex(nodes, sources)
