"""What ``tuidebug advise`` prints (and ``info`` repeats): each suggestion with what in the
trace calls for it, and, once ``advise --try`` has run, what trying it measured — ranked, the
ones that helped first, a suggestion that did not help shown as tried and not helping."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuidebug.inert import inert_text
from tuidebug.trace.queries.verdict import format_duration


# what a suggestion that only an edit of the user's code can apply is, wherever it is listed
CODE_CHANGE = ("a change to your code: advise --try cannot apply it (it runs your script "
               "unchanged), so it is not measured; make the change and trace again")


def advice_lines(suggestions: list[dict[str, Any]], tried: dict[str, dict[str, Any]]
                 ) -> list[Text]:
    """One entry per suggestion (``Suggestion.to_json``), with its verdict when tried
    (``Tried.to_json`` by id)."""
    out = []
    for s in suggestions:
        t = tried.get(str(s.get("id")))
        if t is not None:
            mark = ("✓ ", "bold green") if t.get("helped") else ("✗ ", "yellow")
        elif not s.get("tryable"):
            mark = ("✎ ", "dim")  # a change to the code: --try cannot make it
        else:
            mark = ("· ", "dim")
        out.append(Text.assemble(mark, inert_text(str(s.get("text")), "bold"),
                                 inert_text(f"   [{s.get('about')}]", "dim")))
        out.append(Text.assemble(("    why: ", "dim"), inert_text(str(s.get("why"))[:600])))
        if t is not None:
            out.append(Text.assemble(("    ", ""), inert_text(
                str(t.get("verdict")), "green" if t.get("helped") else "yellow")))
        elif not s.get("tryable"):
            out.append(Text(f"    {CODE_CHANGE}", style="dim"))
    return out


def advice_section(suggestions: list[dict[str, Any]], tried: dict[str, dict[str, Any]]
                   ) -> list[Text]:
    """What ``info`` and the TUI overview show of the advice: the suggestions about recompiles
    and compile failures and the ones that can be tried (a break's change to the code is its "fix:" line), each
    marked verified, tried, untried, or a change to the code (which ``--try`` cannot make);
    nothing without one."""
    shown = [a for a in suggestions
             if a.get("about") in ("recompiles", "compile failure") or a.get("tryable")]
    if not shown:
        return []
    legend = "✓ verified, ✗ tried and did not help, · untried: tuidebug advise TRACE --try"
    if any(not a.get("tryable") and str(a.get("id")) not in tried for a in shown):
        legend += "; ✎ a change to your code, which --try cannot make"
    return [Text.assemble(("advice", "bold"), (f" ({legend})", "dim"))
            ] + advice_lines(shown, tried)


def render_advice(suggestions: list[dict[str, Any]], tried: list[dict[str, Any]],
                  console: Console) -> None:
    """``tuidebug advise``: the suggestions; then, after ``--try``, the runs ranked."""
    if not suggestions:
        console.print("no suggestion: the trace shows no graph break in your code and no "
                      "recompile that something outside your code could change", style="green")
        return
    for line in advice_lines(suggestions, {str(t.get("id")): t for t in tried}):
        console.print(line)
    if not tried:
        return
    t = Table(title="tried (each a run of the script under capture, --no-check)",
              title_justify="left", box=None, padding=(0, 1), header_style="bold")
    for col in ("", "suggestion", "compiles", "recompiles", "graph breaks", "wall", "verdict"):
        t.add_column(col, no_wrap=col not in ("suggestion", "verdict"))
    base = tried[0].get("before") or {}
    t.add_row("", "as traced", str(base.get("compiles")), str(base.get("recompiles")),
              str(base.get("graph_breaks")), format_duration(base.get("wall_s")), "")
    for i, r in enumerate(tried, 1):
        a = r.get("after") or {}
        t.add_row(str(i), inert_text(str(r.get("id"))), str(a.get("compiles")),
                  str(a.get("recompiles")), str(a.get("graph_breaks")), format_duration(a.get("wall_s")),
                  inert_text("helped" if r.get("helped") else
                             ("did not help" if a.get("status") == "ok" else
                              f"script {a.get('status')}"),
                             "green" if r.get("helped") else "yellow"))
    console.print(t)
    console.print("wall: one run each, capture included — not a measurement of speed",
                  style="dim")
    left = [str(s.get("text")) for s in suggestions if not s.get("tryable")]
    if not any(r.get("helped") for r in tried):
        console.print(inert_text(
            f"none of the {len(tried)} suggestions tried removed a compile or a graph break"
            + (f"; left to try, as a change to your code: {'; '.join(left)}" if left else ""),
            "yellow"))
    elif left:
        console.print(inert_text(
            f"not tried, a change to your code that --try cannot make: {'; '.join(left)}"),
            style="dim")
