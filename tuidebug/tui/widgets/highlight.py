"""Code syntax-highlighted as far as it is shown: a ``TextView`` line source that lexes (pygments
tokens, rich styles) only down to the lines asked for, and further when the view scrolls there.

A C++ kernel of 150 lines takes 20–50 ms to lex whole on the 2-core machine — most of a Down in
the code screen's kernel list; its first screenful, a third of that. The lexer is one generator
kept from the top of the file, so a line is always lexed in the state the lines above it left
(a comment or a string spanning lines is highlighted as a whole would be).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator

from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from tuidebug.inert import has_unsafe
from tuidebug.tui.widgets.cells import widest

THEME = "monokai"
CHUNK = 64  # lines lexed past the one asked for (a page of the view, and some)
BATCH = 400  # lines lexed per hold of the lock

_THEMES: dict[str, Any] = {}


def _normalized(code: str) -> str:
    """The text the lexer reads (pygments makes every line end ``\\n``; tabs as 4 spaces)."""
    return code.expandtabs(4).replace("\r\n", "\n").replace("\r", "\n")


class Highlighted:
    """``code`` (of the file ``path``: C++ or Python) for a ``TextView``, highlighted lazily.

    ``plain(i)`` is the line's text at once; ``segments(i)`` (what the view draws) and
    ``rich(i)`` (the same as a ``Text``: what it draws a search's matches on) lex down to line
    ``i`` (and ``CHUNK`` more) first — where the UI thread asks (the view painting a line), only when that
    is near what is lexed already and no worker is lexing: the UI thread never waits for the
    lexer's lock nor lexes a long way down (End on a 16k-line wrapper lexed it all there, 1.6 s).
    Such a line is drawn plain (``is_final(i)`` false: the view does not keep it) and
    ``on_behind(i)``, when set, is told once, so that a worker lexes down to it and the view
    is painted again. ``ensure(n)`` lexes ahead of time (in a worker thread, before the view
    shows it), stopping early when ``cancelled()``. One lock guards the lexer."""

    def __init__(self, code: str, path: str) -> None:
        from pygments.lexers import CppLexer, PythonLexer
        from rich.syntax import PygmentsSyntaxTheme

        self.code = code  # the text as given
        text = _normalized(code)
        plain = text.split("\n")
        if not plain[-1]:
            plain.pop()  # the text's last newline ends a line, starts none (as ``TextLines``)
        self._plain = plain
        # stripnl off: leading blank lines stay (a line's row is its number: cursor, gutter)
        lexer = (CppLexer if path.endswith((".cpp", ".cu", ".h")) else PythonLexer)(
            stripnl=False)
        theme = _THEMES.get(THEME)
        if theme is None:
            theme = _THEMES[THEME] = PygmentsSyntaxTheme(THEME)
        self._theme = theme
        self._tokens: Iterator[tuple[Any, str]] | None = iter(lexer.get_tokens(text))
        # lexed so far, a line as the segments it is drawn with (rendering a ``Text`` to them
        # was most of a kernel's first paint); the last one may be unfinished
        self._lines: list[list[Segment]] = [[]]
        self._styles: dict[Any, Style] = {}
        self._lock = threading.Lock()
        self.on_behind: Callable[[int], None] | None = None
        self._behind = -1  # the furthest line handed out plain (on_behind told)
        self._width: int | None = None

    def __len__(self) -> int:
        return len(self._plain)

    def plain(self, i: int) -> str:
        return self._plain[i]

    def max_width(self) -> int:
        """The widest line's columns (the view's width, without asking every line)."""
        if self._width is None:
            self._width = widest(self._plain)
        return self._width

    def segments(self, i: int) -> list[Segment] | None:
        """Line ``i`` drawn: its highlighted segments, or (not lexed yet) its plain text; None
        for a line with control characters, which only ``rich(i)`` made inert may draw."""
        line = self._plain[i]
        if has_unsafe(line):
            return None
        segments = self._lexed_line(i)
        return [Segment(line)] if segments is None else segments

    def rich(self, i: int) -> Text:
        segments = self._lexed_line(i)
        if segments is None:
            return Text(self._plain[i])
        text = Text()
        for segment in segments:
            text.append(segment.text, segment.style)
        return text

    def _lexed_line(self, i: int) -> list[Segment] | None:
        """Line ``i``'s segments, lexed first where that is near (else None: drawn plain)."""
        if i >= self.lexed() and i < self.lexed() + CHUNK and self._lock.acquire(blocking=False):
            try:  # a chunk at a time, as the view scrolls down
                self._lex(min(i + 1 + CHUNK, len(self._plain)))
            finally:
                self._lock.release()
        if i < self.lexed():
            return self._lines[i]
        if i > self._behind:
            self._behind = i
            if self.on_behind is not None:
                self.on_behind(i)
        return None

    def watch(self, on_behind: Callable[[int], None] | None) -> None:
        """Tell ``on_behind`` of lines handed out plain from now on, every one again: a
        worker told earlier may have been cancelled (another file selected) before it lexed
        them, and the lines would stay plain when the file is shown again."""
        self.on_behind = on_behind
        self._behind = -1

    def is_final(self, i: int) -> bool:
        """Whether line ``i`` is drawn as it will stay (highlighted, or the file is plain)."""
        return i < self.lexed()

    def lexed(self) -> int:
        """How many lines are highlighted (from the top)."""
        return len(self._plain) if self._tokens is None else len(self._lines) - 1

    @property
    def complete(self) -> bool:
        return self._tokens is None

    def ensure(self, lines: int, cancelled: Callable[[], bool] = lambda: False) -> bool:
        """Lex until the first ``lines`` lines are highlighted (or the end); False when
        ``cancelled()`` turned true first. The lock is taken a batch of lines at a time: a
        worker lexing a long file to its end never holds up the view asking for a line."""
        while self.lexed() < min(lines, len(self._plain)):
            if cancelled():
                return False
            with self._lock:
                self._lex(min(lines, self.lexed() + BATCH))
        return True

    def _lex(self, lines: int) -> None:
        tokens, out, styles = self._tokens, self._lines, self._styles
        while tokens is not None and len(out) - 1 < lines:
            item = next(tokens, None)
            if item is None:
                tokens = self._tokens = None
                del out[len(self._plain):]  # the lexer's own last newline: one line too many
                break
            ttype, value = item
            style = styles.get(ttype)
            if style is None:
                s = self._theme.get_style_for_token(ttype)
                style = styles[ttype] = Style(color=s.color, bold=s.bold, italic=s.italic)
            first, *rest = value.split("\n")
            if first:
                out[-1].append(Segment(first, style))
            for part in rest:
                out.append([Segment(part, style)] if part else [])


def highlight(code: str, path: str,
              cancelled: Callable[[], bool] = lambda: False) -> Highlighted | None:
    """``code`` highlighted whole (a long file, in a worker); None when ``cancelled()`` turned
    true meanwhile (a long wrapper's lexing stops once another kernel is selected)."""
    lines = Highlighted(code, path)
    return lines if lines.ensure(len(lines), cancelled) else None
