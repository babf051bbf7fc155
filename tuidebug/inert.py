"""Text from a trace, made inert for the terminal: the one way data meets the screen.

Every string that comes from a trace or a log (graph ids, node and kernel names, error messages,
config names, the recorded command, a log's function names…) is untrusted. Before it is shown
by ``info``, ``diff``, ``flags`` or the TUI it goes through ``inert`` / ``inert_text``:

- control characters and escape sequences are shown visibly (ESC as ``\\x1b``, a bell as
  ``\\x07``, a Unicode direction override as ``\\u202e``…), so nothing from the data can move the
  cursor, clear the screen, set the clipboard (OSC 52) or make a link (OSC 8);
- ``inert_text`` returns a ``rich.text.Text``: Rich markup in the data (``[/]``, ``[link=…]``,
  ``[bold]``) is never interpreted, and no link is made from it.

Never build a markup string from data (``f"[bold]{name}[/]"``), never pass a data string where
Rich or Textual would parse markup (``Table.add_row``, ``console.print``, ``Static``, ``notify``):
pass ``inert_text(value)`` instead.
"""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text

# C0 controls but tab and newline, DEL, C1 controls; Unicode bidirectional overrides and
# isolates, and the line/paragraph separators (they reorder or break what the terminal shows)
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match[str]) -> str:
    c = m.group()
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def inert(value: Any, *, multiline: bool = True, limit: int | None = None) -> str:
    """``value`` as text with every control character shown visibly (``\\x1b``). With
    ``multiline=False`` newlines and tabs are shown as ``\\n`` / ``\\t`` too (a one-line field).
    ``limit``: cut to that many characters, with ``…`` at the end."""
    text = value if isinstance(value, str) else str(value)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    if multiline:
        return _UNSAFE.sub(_visible, text)
    return _UNSAFE_LINE.sub(lambda m: {"\n": "\\n", "\t": "\\t"}.get(m.group()) or _visible(m),
                            text)


def inert_text(value: Any, style: str = "", *, multiline: bool = False,
               limit: int | None = None) -> Text:
    """``value`` as a Rich ``Text`` (markup never interpreted, no links) with its control
    characters shown visibly; one line unless ``multiline``."""
    return Text(inert(value, multiline=multiline, limit=limit), style=style)


def inert_join(parts: list[Any] | tuple[Any, ...], sep: str = ", ") -> str:
    """Several untrusted values as one inert line (``", ".join`` for data)."""
    return sep.join(inert(p, multiline=False) for p in parts)


def has_unsafe(text: str) -> bool:
    return _UNSAFE_LINE.search(text) is not None


def inert_rich(text: Text, multiline: bool = False) -> Text:
    """A styled ``Text`` (from any renderer) with control characters shown visibly, styles
    kept, and no links (a link in a style is dropped). ``multiline``: newlines and tabs kept."""
    unsafe = _UNSAFE if multiline else _UNSAFE_LINE
    linked = any(not isinstance(s.style, str) and s.style.link for s in text.spans)
    if unsafe.search(text.plain) is None and not linked:
        return text
    offsets = sorted({o for m in unsafe.finditer(text.plain) for o in (m.start(), m.end())})
    out = Text(style=text.style, justify=text.justify, overflow=text.overflow,
               no_wrap=text.no_wrap, end=text.end)
    for part in text.divide(offsets) if offsets else [text]:
        if len(part.plain) == 1 and unsafe.search(part.plain):
            vis = Text(inert(part.plain, multiline=False))
            for span in part.spans:
                vis.stylize(span.style, 0, len(vis))
            part = vis
        out.append_text(part)
    if linked:
        out.spans = [s if isinstance(s.style, str) or not s.style.link
                     else s._replace(style=s.style.update_link(None)) for s in out.spans]
    return out


def inert_content(content: Any) -> Any:
    """What a widget shows, made inert: a ``Text`` by ``inert_rich``, a string as plain text
    (never markup); another renderable as it is (render it with ``to_lines`` in the TUI)."""
    if isinstance(content, Text):  # a widget's own lines: newlines kept, as for a string
        return inert_rich(content, multiline=True)
    if isinstance(content, str):
        return inert_text(content, multiline=True)
    return content
