"""What ``info`` says of the numerics of a compile (trace/queries/numerics.py): the first
diverging kernel, its graph, the wrong buffers with their node, errors, values and user line,
its classification when ``tuidebug numerics`` made one (trace/queries/numerics_classes.py);
and the marks the TUI's kernels and passes views put on each judged kernel and FX node."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.padding import Padding
from rich.style import Style
from rich.table import Table
from rich.text import Text

from tuidebug.inert import inert_text
from tuidebug.trace.queries.numerics import KernelNumerics, NodeNumerics
from tuidebug.trace.queries.numerics_classes import CASTS_VERDICT, CONTROL, NONE_DIVERGES, \
    NOT_JUDGED, NOT_LOCATED, NOT_REACHED, NOT_REPRODUCED, RANDOM_VERDICT, UNCONFIRMED, \
    Classified
from tuidebug.viewers.fitted import Row


def _num(x: Any) -> str:
    return f"{x:.3g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"


def _range(r: Any) -> str:
    return f"[{_num(r[0])}, {_num(r[1])}]" if isinstance(r, list) and len(r) == 2 else "—"


def _line(src: Any) -> str:
    if not isinstance(src, dict):
        return ""
    return f"{str(src.get('file') or '?').rsplit('/', 1)[-1]}:{src.get('line')}  " \
           f"{str(src.get('code') or '').strip()}"


KERNEL_META = "numerics_kernel"  # (graph, kernel) on the first diverging kernel's name: a
# screen showing these lines opens that kernel on enter (the TUI's overview)


def kernel_at(line: Text) -> tuple[str, str] | None:
    """The (graph, kernel) a line of ``numerics_lines`` names as the first diverging kernel."""
    for span in line.spans:
        meta = span.style.meta if isinstance(span.style, Style) else {}
        if isinstance(meta.get(KERNEL_META), tuple):
            return meta[KERNEL_META]
    return None


KERNEL_COLUMNS = ("kernel call", "graph", "compiled↔fp64", "eager↔fp64", "verdict")
KERNEL_ROWS = 10  # kernel calls listed by info; --json has them all


def _verdict(k: dict[str, Any], first: dict[str, Any] | None) -> tuple[str, str]:
    if isinstance(first, dict) and (k.get("graph"), k.get("kernel"), k.get("call")) == \
            (first.get("graph"), first.get("kernel"), first.get("call")):
        return "FIRST DIVERGING", FIRST_STYLE
    if k.get("ok") is False:
        return "differs", WRONG_STYLE
    if k.get("judged") is False:
        return "not judged", "dim"
    if k.get("classified"):
        return "random numbers", CLASSIFIED_STYLE
    return "ok" if k.get("ok") else "?", ""


def graph_label(k: dict[str, Any]) -> str:
    """Which graph a kernel call ran in: its id (``0_0-forward``), with its kind when the id
    does not already say it (a forward and its backward, two compiles: told apart)."""
    graph, kind = str(k.get("graph") or ""), str(k.get("kind") or "")
    if not graph:
        return kind or "?"
    return graph if not kind or kind in graph else f"{graph} ({kind})"


def kernel_table(entry: dict[str, Any]) -> Table | None:
    """Per kernel call judged (in execution order): its worst error against float64, eager's,
    the verdict; at most ``KERNEL_ROWS`` rows, always the first diverging kernel's."""
    kernels = [k for k in entry.get("kernels") or [] if isinstance(k, dict)]
    if not kernels:
        return None
    first = entry.get("first") if isinstance(entry.get("first"), dict) else None
    at = next((i for i, k in enumerate(kernels) if _verdict(k, first)[0] == "FIRST DIVERGING"), 0)
    start = max(0, min(at - KERNEL_ROWS // 2, len(kernels) - KERNEL_ROWS))
    shown = kernels[start:start + KERNEL_ROWS]
    t = Table(box=None, padding=(0, 1), header_style="dim", pad_edge=False)
    for col in KERNEL_COLUMNS:
        t.add_column(col, no_wrap=col != "kernel call", overflow="fold")
    if start:
        t.add_row(Text(f"… {start} earlier", "dim"), "", "", "", "")
    for k in shown:
        verdict, style = _verdict(k, first)
        call = f" #{k['call'] + 1}" if isinstance(k.get("call"), int) and k["call"] else ""
        t.add_row(Row(inert_text(k.get("kernel")), Text(call), middle=True),
                  inert_text(graph_label(k)), Text(_num(k.get("err_compiled"))),
                  Text(_num(k.get("err_eager"))), Text(verdict, style))
    rest = len(kernels) - start - len(shown)
    if rest > 0:
        t.add_row(Text(f"… {rest} more (info --json)", "dim"), "", "", "", "")
    return t


def numerics_lines(entry: dict[str, Any]) -> list[RenderableType]:
    """The lines for one compile's ``numerics`` entry of the summary (the first diverging
    kernel, then its classification when there is one), then its table of kernel calls
    (``kernel_table``)."""
    out = _first_lines(entry)
    c = entry.get("classified")
    if isinstance(c, dict):
        out.extend(classification_lines(Classified.from_json(c)))
    table = kernel_table(entry)
    if out and table is not None:
        out.append(Padding(table, (0, 0, 0, 6)))
        if _differ_after_first(entry):
            out.append(Text(f"      {CARRIED}", "dim"))
    return out


CARRIED = ("a kernel that differs after the first diverging one may only carry its error "
           "forward (it ran on the compiled values before it): only the first is known wrong")


def _differ_after_first(entry: dict[str, Any]) -> bool:
    first = entry.get("first") if isinstance(entry.get("first"), dict) else None
    kernels = [k for k in entry.get("kernels") or [] if isinstance(k, dict)]
    return first is not None and any(_verdict(k, first)[0] == "differs" for k in kernels)


CLASS_STYLE = {NONE_DIVERGES: "bold green", CASTS_VERDICT: "bold yellow",
               RANDOM_VERDICT: "bold yellow", NOT_REPRODUCED: "bold yellow",
               NOT_REACHED: "bold yellow", UNCONFIRMED: "bold yellow",
               NOT_JUDGED: "bold yellow", NOT_LOCATED: "bold yellow"}  # any other verdict: a
# wrong kernel (bold red)


def classification_lines(c: Classified) -> list[Text]:
    """``classified: VERDICT — why``, then each flag's re-run and its outcome (``tuidebug
    numerics``'s classification of a compile)."""
    out = [Text.assemble(("    classified: ", "bold"),
                         inert_text(c.verdict, CLASS_STYLE.get(c.verdict, "bold red")),
                         inert_text(f" — {c.why}" if c.why else ""))]
    for r in c.reruns:
        where = f" ({r.trace})" if r.trace else ""
        run = ("control (same settings)" if r.flag == CONTROL else
               "control (fallback_random=True again)" if r.flag.startswith(CONTROL) else
               f"{r.flag}=True")
        out.append(inert_text(f"      {run}: {r.outcome}: {r.detail}{where}", "dim"))
    return out


def _first_lines(entry: dict[str, Any]) -> list[RenderableType]:
    first = entry.get("first")
    kernels = entry.get("kernels") or []
    if not isinstance(first, dict):
        note = entry.get("note")
        if not kernels and not note:
            return []
        classified = sum(1 for k in kernels if isinstance(k, dict) and k.get("classified"))
        unjudged = sum(1 for k in kernels if isinstance(k, dict) and k.get("judged") is False)
        n = len(kernels) - unjudged
        said = (f"{n}, none diverging" if not classified else
                f"{n}, {classified} differing for a reason that is not a bug") + (
            f" ({unjudged} more wrote no FX node's value, a layout copy: not judged)"
            if unjudged else "")
        return [Text.assemble(("    kernels judged: ", "dim"),
                              inert_text(said + (f" — {note}" if note else "")))]
    call = f" (call {first['call'] + 1})" if first.get("call") else ""
    name = inert_text(f"{first.get('kernel')}{call}", "bold")
    name.stylize(Style(meta={KERNEL_META: (str(first.get("graph")), str(first.get("kernel")))}))
    out: list[RenderableType] = [Text.assemble(("    first diverging kernel: ", "bold red"),
                         name,
                         inert_text(f"  in {first.get('graph')} ({first.get('kind')}), "
                                    f"{first.get('judged')} kernel calls judged"))]
    for b in first.get("buffers") or []:
        out.append(inert_text(
            f"      {b.get('buffer')} = node {b.get('node')}: compiled↔fp64 "
            f"{_num(b.get('err_compiled'))}, eager↔fp64 {_num(b.get('err_eager'))} "
            f"({b.get('rule')}); values {_range(b.get('value_range'))}, eager "
            f"{_range(b.get('eager_range'))}"))
        if b.get("source"):
            out.append(inert_text(f"        {_line(b.get('source'))}", "dim"))
        if b.get("also_written_by"):
            out.append(inert_text(
                f"        also written before by {', '.join(map(str, b['also_written_by']))} "
                f"(judged only after this kernel: the wrong value may come from there)",
                "yellow"))
    if first.get("fx_nodes"):
        out.append(inert_text(f"      its FX nodes: {', '.join(map(str, first['fx_nodes']))}",
                              "dim"))
    return out



# -- marks on the kernels and passes views (the TUI's code and pass-stepper screens) ------------

FIRST_STYLE, WRONG_STYLE, OK_STYLE, CLASSIFIED_STYLE = "bold red", "red", "green", "yellow"


def error_pair(err_compiled: Any, err_eager: Any, *, brief: bool = False) -> str:
    """``0.309 vs eager 4.37e-08``: an error against float64, eager's beside it (``brief``:
    ``0.31 vs 4.4e-08``, for a list row)."""
    if brief:
        def two(x: Any) -> str:
            return f"{x:.2g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"
        return f"{two(err_compiled)} vs {two(err_eager)}"
    return f"{_num(err_compiled)} vs eager {_num(err_eager)}"


def kernel_mark(k: KernelNumerics | None) -> Text:
    """The mark after a kernel's name in a list: ``✗ first 0.31 vs 4.4e-08`` (the first
    diverging kernel: its error against float64, eager's), ``✗ 0.54 vs 6.4e-08`` (wrong, after
    it: its error may be the first one's carried forward), ``~ random`` (differs for a reason
    that is not a bug), ``✓`` (judged, matches); nothing when the kernel was not judged."""
    if k is None:
        return Text()
    if k.first:
        return Text(f"  ✗ first {error_pair(k.err_compiled, k.err_eager, brief=True)}",
                    FIRST_STYLE)
    if not k.ok:
        return Text(f"  ✗ {error_pair(k.err_compiled, k.err_eager, brief=True)}", WRONG_STYLE)
    if k.classified:
        return Text("  ~ random", CLASSIFIED_STYLE)
    return Text("  ✓", OK_STYLE)


def kernels_judged_mark(judged: list[KernelNumerics]) -> Text:
    """What the numerics check said of a graph's kernels, for a heading: ``(✗ first, 2 ✗
    after it)`` (only the first diverging kernel is known to be wrong: one after it may carry
    its error forward), ``(✓, 1 ~ random)``, ``(✓)`` (every one judged matches); nothing when
    none was judged."""
    if not judged:
        return Text()
    first = sum(1 for k in judged if k.first)
    after = sum(1 for k in judged if not k.ok and not k.first)
    random = sum(1 for k in judged if k.ok and k.classified)
    parts = (["✗ first"] if first else []) + \
        ([f"{after} ✗ after it" if first else f"{after} ✗"] if after else [])
    if not parts:
        parts = ["✓"]
    if random:
        parts.append(f"{random} ~ random")
    style = FIRST_STYLE if first else WRONG_STYLE if after else OK_STYLE
    return Text(f" ({', '.join(parts)})", style)


def node_mark(n: NodeNumerics | None) -> Text:
    """The mark after an FX node whose value a judged buffer held (as ``kernel_mark``)."""
    if n is None:
        return Text()
    if n.first:
        return Text(f"  ✗ first diverging {error_pair(n.err_compiled, n.err_eager)}", FIRST_STYLE)
    if not n.ok:
        return Text(f"  ✗ {error_pair(n.err_compiled, n.err_eager)}", WRONG_STYLE)
    return Text("  ✓", OK_STYLE)


def kernel_numerics_line(k: KernelNumerics) -> Text:
    """A kernel's verdict in words, for its detail panel."""
    calls = f"{k.calls} call{'s' if k.calls != 1 else ''} judged"
    if k.first:
        verdict = ("the first diverging kernel: its output departs from float64 by more than "
                   "eager's does")
    elif not k.ok:
        verdict = "differs, after the first diverging kernel (its error may be carried forward)"
    elif k.classified:
        verdict = f"differs, classified: {k.classified}"
    else:
        verdict = "matches"
    return Text.assemble(("numerics  ", "bold red" if not k.ok else "bold green"),
                         inert_text(f"compiled↔fp64 {_num(k.err_compiled)}, eager↔fp64 "
                                    f"{_num(k.err_eager)}; {calls}; {verdict}",
                                    FIRST_STYLE if k.first else ""))
