"""The lines ``info`` prints about graph breaks: the summary (``5 graph breaks from 4
causes``), then each cause with its breaks (the user's line and its text, the frame, what ran
eagerly) and what the user can change. Everything from the trace is shown inert."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tuidebug.viewers.dynamic_view import where
from tuidebug.inert import inert_text

MAX_CAUSES = 20
MAX_PER_CAUSE = 8


def _line(b: dict[str, Any]) -> Text:
    ul = b.get("user_line") or b.get("site") or {}
    at = where(ul) or "?"
    code = str(ul.get("code") or "")
    fn = ul.get("fn") or b.get("frame") or "?"
    resumed = b.get("resumed_in")
    return Text.assemble(
        inert_text(f"    {at}", "bold"), inert_text(f"  {code}" if code else ""),
        inert_text(f"   (in {fn}, compile {b.get('compile_id')}", "dim"),
        inert_text(f", resumed in {resumed})" if resumed else ", the rest not compiled)",
                   "dim"))


def summary_breaks(s: dict[str, Any]) -> list[dict[str, Any]]:
    """Every graph break of an ``info`` summary (``GraphBreak.to_json``), in compile order."""
    return [b for c in s.get("compiles") or [] for b in c.get("graph_breaks") or []]


def break_notes(headline: str, breaks: list[dict[str, Any]]) -> list[Text]:
    """What ``info`` (and the TUI's overview) says about graph breaks (``GraphBreak.to_json``
    each; ``headline``: ``BreakSummary.headline``); nothing without one."""
    if not breaks:
        return []
    out = [Text.assemble(("graph breaks: ", "bold yellow"), inert_text(headline))]
    by_key: dict[str, list[dict[str, Any]]] = {}
    for b in breaks:
        by_key.setdefault(str(b.get("key")), []).append(b)
    for key, bs in list(by_key.items())[:MAX_CAUSES]:
        first = bs[0]
        cause = str(first.get("cause") or "")
        out.append(Text.assemble(
            inert_text(f"  {cause}", "yellow"), inert_text(key[len(cause):][:300]),
            inert_text(f"  ({len(bs)}×)" if len(bs) > 1 else "", "dim")))
        for b in bs[:MAX_PER_CAUSE]:
            out.append(_line(b))
            site, ul = b.get("site") or {}, b.get("user_line") or {}
            if site and (site.get("file"), site.get("line")) != (ul.get("file"), ul.get("line")):
                # a break inside a library: where it is, and the compiled frame's call of it
                frame = b.get("frame_line") or {}
                out.append(Text.assemble(
                    ("      the break: ", "dim"),
                    inert_text(f"{where(site)} {site.get('code') or ''} (in "
                               f"{site.get('fn') or '?'})"),
                    inert_text(f", called at {where(frame)} {frame.get('code') or ''}"
                               if frame and frame != site else "", "dim")))
        if len(bs) > MAX_PER_CAUSE:
            out.append(inert_text(f"    … {len(bs) - MAX_PER_CAUSE} more", "dim"))
        # one line per distinct advice: a graph_break() of the user's and one torch calls
        # itself share a cause, not what to do
        for advice in dict.fromkeys(str(b["advice"]) for b in bs if b.get("advice")):
            out.append(Text.assemble(("    fix: ", "green"), inert_text(advice)))
    if len(by_key) > MAX_CAUSES:
        out.append(inert_text(f"  … {len(by_key) - MAX_CAUSES} more causes "
                              "(tuidebug info --json lists them all)", "dim"))
    return out


def skipped_notes(skipped: list[dict[str, Any]]) -> list[Text]:
    """The user's own frames Dynamo did not compile (``SkippedFrame.to_json`` each), with its
    reason; frames of torch itself only counted."""
    own = [f for f in skipped if f.get("own")]
    out = []
    for f in own[:MAX_CAUSES]:
        reason = str(f.get("reason") or "?").splitlines()[0]
        out.append(Text.assemble(("not compiled: ", "yellow"),
                                 inert_text(f"{f.get('function')} ({f.get('where')}): "),
                                 inert_text(reason[:300])))
        if f.get("advice"):
            out.append(Text.assemble(("    fix: ", "green"), inert_text(str(f["advice"]))))
    if len(own) > MAX_CAUSES:
        out.append(inert_text(f"  … {len(own) - MAX_CAUSES} more (tuidebug info --json)", "dim"))
    return out
