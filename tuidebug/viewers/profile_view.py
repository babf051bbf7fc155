"""Rich rendering of a trace's profile (``info``'s "where the time goes" section): totals, the
top kernels and source lines, compiled vs eager (with a phase column, fwd or bwd, when the
backward was profiled too). No torch, no Textual."""

from __future__ import annotations

from typing import Any, Iterable

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from tuidebug.trace.queries.graph_times import TOO_FEW, GraphTimes, too_few_text
from tuidebug.trace.queries.verdict import FASTER, SAME, Spread
from tuidebug.trace.queries.verdict import format_duration as duration
from tuidebug.viewers.fitted import Row
from tuidebug.inert import inert_text
from tuidebug.viewers.ledger_view import ledger_lines, ledger_table, verdict_line

TOP = 8  # rows of each table `info` prints (info --json has 20; the TUI every one)


def share(v: Any) -> str:
    return f"{v * 100:.0f}%" if isinstance(v, (int, float)) else "–"


def line_label(row: dict[str, Any]) -> str:
    """``mlp.py:28  x = self.norm1(…)`` for a line row (its key when it has no file)."""
    file = row.get("file")
    if not file:
        return str(row.get("key"))
    name = str(file).replace("\\", "/").rsplit("/", 1)[-1]
    code = str(row.get("code") or "").strip()
    return f"{name}:{row.get('line')}" + (f"  {code[:60]}" if code else "")


def _spread(s: Spread | None) -> str:
    """`` (p10–p90 1.10 ms–1.30 ms)``: the spread of one side's runs; nothing when not
    recorded."""
    return f" (p10–p90 {duration(s.p10_s)}–{duration(s.p90_s)})" if s is not None else ""


def graph_times_text(t: dict[str, Any], judged: bool) -> str:
    """``compiled 0.50 ms per call (0.48–0.52 ms), eager 1.10 ms (…)`` and, where no whole call
    was judged (``judged``), what the two allow: a word only where their p10–p90 (of at least
    ``graph_times.MIN_RUNS`` runs each) do not overlap, said as timed apart; inside them, not
    told apart from the noise (never "no difference"); with fewer runs, too few to tell; none
    at all without the spreads (an older trace: times only)."""
    g = GraphTimes.from_totals(t)
    said = (f"compiled {duration(t.get('compiled_wall_s'))} per call{_spread(g.compiled)}, "
            f"eager {duration(t.get('eager_wall_s'))}{_spread(g.eager)}")
    outcome, c, e = g.outcome, g.compiled, g.eager
    if judged or outcome is None or c is None or e is None:
        return said
    if outcome == TOO_FEW:
        return f"{said}: {too_few_text(g.runs)}"
    if outcome == SAME:
        return (f"{said}: not told apart from the noise of {g.runs} runs each (timed apart: "
                "their p10–p90 overlap)")
    factor = e.median_s / c.median_s if outcome == FASTER else c.median_s / e.median_s
    word = "faster" if outcome == FASTER else "SLOWER"
    return (f"{said}: compiled {factor:.2f}× {word}, timed apart (compiled runs, then eager "
            f"runs; their p10–p90 of {g.runs} runs each do not overlap)")


def whole_text(view: Any) -> Text:
    """The TUI's totals pane: the whole call's verdict and ledger (one line per part), then
    the compiled graphs' totals (``view``: a ``ProfileView``)."""
    text = Text()
    for c in view.calls[:1]:
        v = c.verdict_json()
        text.append(verdict_line(v))
        parts = ledger_lines([p.as_json() for p in c.ledger], v.get("compiled_s"))
        if parts:
            text.append("\n")
            text.append(inert_text("one compiled call: " + " · ".join(parts)))
        text.append("\n")
    for note in view.notes:  # a whole call not timed, and why (no verdict above)
        if note.startswith("whole call of"):
            text.append(inert_text(note, "yellow"))
            text.append("\n")
    text.append(totals_text(view.totals, judged=bool(view.calls)))
    return text


def totals_text(t: dict[str, Any], judged: bool = False) -> Text:
    """The compiled graphs' totals; ``judged``: a whole call's verdict is shown beside them
    (then these graph-only times, measured apart, give none of their own)."""
    text = Text.assemble(
        ("where the time goes ", "bold"),
        inert_text(f"({t.get('runs')} runs on {t.get('device')}"
                   f"{', CUDA graphs' if t.get('cudagraphs') else ''}): "),
        inert_text(f"{graph_times_text(t, judged)}; generated kernels "
                   f"{share(t.get('generated_share'))}, extern calls "
                   f"{share(t.get('extern_share'))}, Python/launch/other "
                   f"{share(t.get('overhead_share'))}"))
    peak = t.get("compiled_peak_memory_bytes")
    if isinstance(peak, int):
        text.append(inert_text(f"; peak memory {peak / 2**20:.1f} MiB compiled, "
                               f"{(t.get('eager_peak_memory_bytes') or 0) / 2**20:.1f} MiB eager"))
    back = t.get("backward")
    if isinstance(back, dict):
        text.append("\n")
        text.append(inert_text(
            f"backward: {graph_times_text(back, judged)}; generated kernels "
            f"{share(back.get('generated_share'))}, extern calls "
            f"{share(back.get('extern_share'))}, other {share(back.get('overhead_share'))}"))
    text.append("\n")
    text.append(DYNAMO_NOT_INCLUDED if judged else DYNAMO_NOT_INCLUDED.replace(
        "are in the whole call's verdict above", "are not in them (no whole call measured)"),
        style="dim")
    return text


# what the compiled times measure (the profile calls the compiled graph itself, from inside the
# user's call): a user calling the compiled function also pays Dynamo's per-call work before it
DYNAMO_NOT_INCLUDED = ("times per call of the compiled graphs themselves (the inner level): "
                       "Dynamo's guard checks and argument collection, run before them on every "
                       "call of the compiled function, are in the whole call's verdict above")


def phases(rows: list[dict[str, Any]]) -> bool:
    """Whether some row is of the backward (then tables show a phase column)."""
    return any(r.get("phase") == "bwd" for r in rows)


def _name(value: Any, *, middle: bool = False) -> Row:
    """A name cell of a table whose column may shrink: one line, cut with … (rich shrinks only
    the columns that may wrap, so the times beside it stay whole); ``middle``: keep the end too
    (kernel names differ at their ends)."""
    return Row(inert_text(value), middle=middle)


def _calls(v: Any) -> Text:
    """Calls per run: a whole number as one (``1``, not ``1.0``)."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return inert_text("–" if v is None else str(v))


def several_compiles(graphs: Iterable[Any]) -> bool:
    """Kernel rows of more than one compile (``graphs``: each row's graph id; a recompile's
    graph has the same kernel names as the first compile's): each row says its graph."""
    return len({str(g).split("-")[0] for g in graphs}) > 1


def render_profile(p: dict[str, Any], console: Console, top: int = TOP) -> None:
    v = p.get("verdict")
    if isinstance(v, dict):
        console.print(verdict_line(v))
        if p.get("ledger"):
            console.print(Padding(ledger_table(p["ledger"], v.get("compiled_s")), (0, 0, 0, 4)))
    console.print(totals_text(p.get("totals") or {}, judged=isinstance(v, dict)))
    lines, kernels = p.get("lines") or [], p.get("kernels") or []
    both = phases(lines) or phases(kernels)
    t = Table(box=None, padding=(0, 1), header_style="dim", pad_edge=False)
    for col in ("source line", *(("phase",) if both else ()), "compiled", "eager"):
        # on a narrow console only the name column gives way (cut with …): the times stay whole
        t.add_column(col, justify="left" if col in ("source line", "phase") else "right",
                     no_wrap=col != "source line")
    for r in lines[:top]:
        t.add_row(_name(line_label(r)), *((inert_text(r.get("phase")),) if both else ()),
                  duration(r.get("compiled_s")), duration(r.get("eager_s")))
    console.print(Padding(t, (0, 0, 0, 4)))
    k = Table(box=None, padding=(0, 1), header_style="dim", pad_edge=False)
    # kernels of several compiles (a recompile's graph has the same kernel names): say whose
    # (a forward and its backward are told apart by the phase)
    graphs = several_compiles(r.get("graph") for r in kernels[:top])
    for col in ("kernel", *(("graph",) if graphs else ()), *(("phase",) if both else ()),
                "kind", "time", "calls"):
        k.add_column(col, justify="left" if col in ("kernel", "graph", "phase", "kind")
                     else "right", no_wrap=col != "kernel")
    for r in kernels[:top]:
        k.add_row(_name(r.get("key"), middle=True),
                  *((inert_text(r.get("graph")),) if graphs else ()),
                  *((inert_text(r.get("phase")),) if both else ()),
                  inert_text(r.get("kind")), duration(r.get("compiled_s")), _calls(r.get("calls")))
    console.print(Padding(k, (0, 0, 0, 4)))
    roof = p.get("roofline") or []
    if roof:
        r = Table(title="roofline (Triton kernels, per call)", title_justify="left", box=None,
                  padding=(0, 1), header_style="dim", pad_edge=False)
        for col in ("kernel", "time", "MB", "GB/s", "of peak", "bound", ""):
            r.add_column(col, justify="left" if col in ("kernel", "bound", "") else "right",
                         no_wrap=col != "")
        for row in roof[:top]:
            frac = row.get("flops_fraction") if row.get("bound") == "compute" else \
                row.get("bandwidth_fraction")
            r.add_row(inert_text(row.get("key")), duration(row.get("time_s")),
                      f"{(row.get('bytes') or 0) / 1e6:.2f}", f"{row.get('gbps') or 0:.0f}",
                      share(frac), inert_text(row.get("bound")),
                      inert_text(row.get("why") or "", "yellow" if row.get("flagged") else ""))
        console.print(Padding(r, (0, 0, 0, 4)))
    for note in p.get("notes") or []:
        console.print(inert_text(f"  note: {note}", "dim"))


def _signed(v: Any) -> Text:
    if not isinstance(v, (int, float)) or not v:
        return Text("")
    return Text(("+" if v > 0 else "−") + duration(abs(v)), style="red" if v > 0 else "green")


def _change(v: Any, apart: bool | None, few: int | None = None) -> Text:
    """A total's change A → B, timed in two processes: red or green only where the two traces'
    runs are apart (``apart``); inside their spread, ``(not told apart)``; with too few runs
    (``few``: the fewest), ``(too few runs to tell …)``; without spreads, uncoloured."""
    if apart:
        return _signed(v)
    plain = _signed(v).plain
    if plain and few is not None:
        return Text(f"{plain} ({too_few_text(few)})", style="dim")
    return Text(plain + (" (not told apart)" if apart is False and plain else ""),
                style="dim" if apart is False else "")


def parts_untold(p: dict[str, Any]) -> str | None:
    """Why ``diff`` shows no change per kernel, line or module (they have no spread of their
    own): the compiled call's own change was not told apart from the noise, or its runs were
    too few; None where it was told, or is not known (no spreads: an older trace)."""
    if (p.get("totals_changed") or {}).get("compiled_wall_s") is False:
        return "the compiled call's change is not told apart from the noise"
    few = (p.get("totals_few_runs") or {}).get("compiled_wall_s")
    return f"the compiled call's change: {too_few_text(few)}" if few is not None else None


def profile_diff_tables(p: dict[str, Any], top: int = TOP) -> list[Any]:
    """``tuidebug diff``'s tables of two profiled traces: per-call totals, then the kernels,
    source lines and modules whose time changed most; when the two whole calls did not change
    (``calls_same``), a line saying so instead (their parts' differences are noise)."""
    if p.get("calls_same"):
        return [Text("where the time goes: not compared part by part — the whole call did not "
                     "change (compiled vs eager, each trace interleaved; timed in two "
                     "processes: the rounds' ratios overlap)",
                     style="dim")]
    t = Table(title="where the time goes, per call (A → B)", title_justify="left",
              show_edge=False)
    for col in ("", "A", "B", "change"):
        t.add_column(col, justify="left" if not col else "right")
    names = {"compiled_wall_s": "compiled call", "eager_wall_s": "eager call",
             "generated_s": "generated kernels", "extern_s": "extern calls",
             "overhead_s": "Python/launch/other"}
    judged, few = p.get("totals_changed") or {}, p.get("totals_few_runs") or {}
    for key, label in names.items():
        v = (p.get("totals") or {}).get(key) or {}
        a, b = v.get("a"), v.get("b")
        change = b - a if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None
        t.add_row(label, duration(a), duration(b), _change(change, judged.get(key), few.get(key)))
    out: list[Any] = [t]
    untold = parts_untold(p)
    if untold is not None:  # each part's difference, without a spread, would read as a change
        out.append(Text(f"time per kernel, source line and module: not compared — {untold} "
                        "(timed in two processes; the parts have no spread of their own)",
                        style="dim"))
        return out
    for table, title in (("kernels", "kernel"), ("lines", "source line"), ("modules", "module")):
        rows = [r for r in p.get(table) or [] if r.get("delta")][:top]
        if not rows:
            continue
        k = Table(title=f"time per {title}, largest changes first", title_justify="left",
                  show_edge=False)
        for col in (title, "A", "B", "change"):
            k.add_column(col, justify="left" if col == title else "right")
        for r in rows:
            label = (line_label(r) + (" (bwd)" if r.get("phase") == "bwd" else "")
                     if table == "lines" else str(r.get("key")))
            k.add_row(inert_text(label), duration(r.get("a")), duration(r.get("b")),
                      _signed(r.get("delta")))
        out.append(k)
    return out
