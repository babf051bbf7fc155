"""Screens built before they are asked for: after the first screen is painted, the app builds
the other screens one at a time while nobody presses a key, so that a number key switches to a
screen already composed, styled, laid out and showing the current graph.

Opening a screen on the 24-layer trace cost 330–600 ms CPU (``bench/tui_open.py``): composing and
mounting its widgets, Textual re-reading the whole stylesheet and re-applying it to every screen
already open (a screen new to a mode is marked as having missed every CSS update), laying it
out and painting it several times, and reading what it shows. Here each of those happens in an
idle moment, one screen per moment; what is left to the key is the switch: one layout check and
one paint.

A step runs only when no key or click came for ``QUIET_S`` and no worker runs (a key pressed
meanwhile is answered first: a step is a single, short piece of work on the UI thread, the reads
it starts run in workers; a screen is laid out, styled and laid out again in three steps,
rendered a few lines of one widget at a time, its frame composed a few rows at a time; between
two steps the event loop pauses ``YIELD_S``, long enough for a key to be taken). A screen built
in the background that the user opened first (a key pressed before its turn) is dropped. When the app's current graph changes, screens built earlier
are brought up to date the same way, one per idle moment; one shown before that happens loads
the new graph when shown, as it would without any of this.

Once every screen is built, what comparing the open trace with another works out from the open
trace alone (``trace/diff/ahead.py``: its graphs' kernels and code, wrapper, IR and fusion
counts, file digests) is worked out the same way: a step at a time, in a worker, the steps left
kept for the next idle moment when a key comes — so that the first comparison of a session reads
only the other trace (on the 24-layer trace it read the open trace's second graph for the first
time: half of its CPU, and the collection of what that made). And in idle moments after that,
what the app made since the last freeze is collected and frozen when it is much
(``heap.keep_read``), rather than by the next read.

Textual has no public call that mounts a screen without showing it: ``install`` uses the app's
``_register`` and ``_screen_stacks`` (textual 8.2, pinned in requirements-dev.txt), checked to
exist first — without them nothing is built ahead, and each screen is built when first shown.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Callable

from tuidebug.tui import heap

from textual.css.query import NoMatches
from textual.geometry import Region
from textual.screen import Screen
from textual.widget import AwaitMount, Widget

if TYPE_CHECKING:
    from textual.app import App

QUIET_S = 0.15  # no key or click for this long: an idle moment
POLL_S = 0.05  # how often an idle moment is looked for
PIECE_LINES = 8  # a screen rendered this many lines of one widget at a time
PIECE_S = 0.005  # pieces run one after another in an idle moment for this long at most
YIELD_S = 0.001  # the pause between two steps, in which a key pressed meanwhile is answered
HEAP_S = 0.25  # how often an idle moment is looked for to freeze what was read (heap)


def can_install(app: App[Any]) -> bool:
    """Whether this Textual lets a mode's screen be mounted without being shown."""
    return isinstance(getattr(app, "_screen_stacks", None), dict) \
        and callable(getattr(app, "_register", None))


def sync_css_count(screen: Screen[Any]) -> None:
    """Mark a new ``screen`` as having seen the app's CSS updates so far.

    Textual marks every new screen as having missed them all (``_css_update_count = -1``), and
    showing it first then re-reads the whole stylesheet and re-applies it to every screen open
    (measured: a third of opening a screen). A new screen's widgets are styled as they mount,
    with the stylesheet as it is: nothing was missed. A theme changed later still counts."""
    try:
        app = screen.app
    except Exception:  # no app running (a screen made outside one)
        return
    count = getattr(app, "_css_update_count", None)
    if isinstance(count, int) and hasattr(screen, "_css_update_count"):
        screen._css_update_count = count


def style_key(app: App[Any]) -> tuple[object, ...]:
    """What the styles of a screen's widgets depend on beyond the widgets themselves: the app's
    CSS updates so far (a theme or a stylesheet changed) and the app's pseudo-classes (its
    focus, dark or light, inline, colours). A screen styled under one key needs no restyling
    while the key is the same."""
    return (getattr(app, "_css_update_count", None), app.app_focus, app.theme, app.is_inline,
            app.no_color, getattr(app, "native_ansi_color", None))


async def install(app: App[Any], mode: str, screen: Screen[Any]) -> bool:
    """Mount ``screen`` as the screen of ``mode`` without showing it, and lay it out at the
    app's size; False (nothing installed, ``screen`` removed) when ``mode`` got its screen
    meanwhile (the user opened it first)."""
    stacks: dict[str, list[Screen[Any]]] = app._screen_stacks  # type: ignore[attr-defined]
    if stacks.get(mode):
        return False
    sync_css_count(screen)
    widgets = app._register(app, screen)  # type: ignore[attr-defined]
    await AwaitMount(screen, widgets)
    if not app.is_running:  # closing: its screens are being closed, leave them alone
        return False
    if stacks.get(mode) or mode not in app._modes:  # type: ignore[attr-defined]
        await screen.remove()
        return False
    stacks[mode] = [screen]
    return True


def lay_out(app: App[Any], screen: Screen[Any]) -> list[Callable[[], None]]:
    """Style and lay out ``screen`` at the app's size while it is not shown (nothing reaches
    the terminal): showing it then finds its widgets styled and sized. Measured before this:
    showing a built screen laid it out twice (its scroll bars, made by the first layout, styled
    only when shown). In three steps, each a few milliseconds (10-17 ms whole on the 24-layer
    trace): laid out, styled, laid out again where the styles changed sizes."""
    refresh_layout: Callable[..., None] | None = getattr(screen, "_refresh_layout", None)
    if refresh_layout is None:
        return []

    def hidden() -> bool:
        return not screen.is_current and screen.is_mounted

    def first() -> None:
        if hidden():
            refresh_layout(app.size)

    def style() -> None:
        if hidden():
            app.stylesheet.update_nodes(screen.walk_children(with_self=True), animate=False)
            if hasattr(screen, "styled_as"):
                screen.styled_as = style_key(app)  # shown as it is: no restyling (TraceScreen)

    def again() -> None:
        if hidden() and (getattr(screen, "_layout_required", False) or screen.size != app.size):
            refresh_layout(app.size)
            screen._layout_required = False  # type: ignore[attr-defined]
    return [first, style, again]


def render_bands(screen: Screen[Any]) -> list[Callable[[], None]]:
    """The frame of ``screen`` (laid out, its widgets' lines rendered by ``render_pieces``)
    composed ``PIECE_LINES`` rows at a time and dropped: what it leaves behind (each line's
    pieces, cut where the widgets meet, kept by the lines themselves) makes the frame that
    shows the screen cheaper (the code screen's first show 75 -> 52 ms). Whole, it was one
    step of 10-20 ms on the 24-layer trace."""
    compositor = getattr(screen, "_compositor", None)
    chops = getattr(compositor, "_render_chops", None)
    if chops is None or screen.is_current or not screen.is_mounted:
        return []
    width, height = compositor.size

    def band(top: int) -> None:
        if not screen.is_current and screen.is_mounted and compositor.size == (width, height):
            chops(Region(0, top, width, min(PIECE_LINES, height - top)),
                  lambda y: top <= y < top + PIECE_LINES)
    return [lambda top=top: band(top) for top in range(0, height, PIECE_LINES)]


def render_pieces(screen: Screen[Any]) -> list[Callable[[], None]]:
    """``render`` in small pieces: each renders ``PIECE_LINES`` lines of one widget of
    ``screen`` (laid out, not shown) into that widget's cache of lines (the one ``render``
    fills, line by line), so that a key pressed meanwhile waits for one piece, not for the
    whole screen (a screen's render was 15-83 ms CPU on the 24-layer trace at load 7). The
    pieces are listed from the layout as it is now; ``render`` after them composes the frame
    from lines already rendered."""
    visible = getattr(getattr(screen, "_compositor", None), "visible_widgets", None)
    if not isinstance(visible, dict) or screen.is_current or not screen.is_mounted:
        return []
    pieces: list[Callable[[], None]] = []
    for widget, (region, clip) in visible.items():
        x, y, width, height = region.intersection(clip)
        for top in range(0, height, PIECE_LINES):
            crop = Region(x - region.x, y - region.y + top, width,
                          min(PIECE_LINES, height - top))
            pieces.append(lambda widget=widget, crop=crop: _render_piece(screen, widget, crop))
    return pieces


def _render_piece(screen: Screen[Any], widget: Widget, crop: Region) -> None:
    if not screen.is_current and screen.is_mounted and widget.is_mounted:
        widget.render_lines(crop)


def _loaded(screen: Screen[Any]) -> bool:
    """Whether ``screen`` is mounted and shows what it reads (its ``is_loaded``)."""
    if not screen.is_mounted:
        return False
    try:
        return bool(getattr(screen, "is_loaded", lambda: True)())
    except NoMatches:  # still composing
        return False


def _unpainted(screen: Screen[Any]) -> bool:
    """Whether ``screen`` has a layout or a repaint still to do."""
    return bool(getattr(screen, "_layout_required", False)
                or getattr(screen, "_repaint_required", False)
                or getattr(screen, "_dirty_widgets", None))


class Prebuilder:
    """Builds the screens of ``modes`` in the background, one per idle moment, and brings them
    up to date after a graph change. ``prepare(screen)`` makes a built screen show the app's
    current graph (returns False when it already does)."""

    def __init__(self, app: App[Any], modes: list[str],
                 prepare: Callable[[Screen[Any]], bool],
                 ahead: Callable[[], list[Callable[[], object]]] | None = None) -> None:
        self.app = app
        self.ahead = ahead  # lists the work done ahead once the screens are built
        self.modes = list(modes)
        self.prepare = prepare
        self.last_input = 0.0
        self.enabled = can_install(app)
        self._timer: Any = None
        self._busy = False
        self._prepared: set[int] = set()  # screens prepared since start(): once each
        self._after: list[Callable[[], None]] = []  # what is left of a screen's preparation
        self._pieces: list[Callable[[], None]] = []  # what is left of a screen's render
        self.built: list[str] = []  # modes built here, in order (tests read it)
        self._shown_since: float | None = None  # the screen on display loaded and painted
        self._ahead: list[Callable[[], object]] | None = None  # left of ``ahead()``'s steps
        self.ahead_done = 0  # steps of ``ahead()`` done (tests read it)
        self._heap_timer: Any = None

    def start(self) -> None:
        """Begin (again: after a graph change, or another trace opened)."""
        self._prepared.clear()
        if self.enabled and self._timer is None:
            self._timer = self.app.set_interval(POLL_S, self._tick)
        if self.enabled and self.ahead is not None and self._heap_timer is None:
            self._heap_timer = self.app.set_interval(HEAP_S, self._keep_read)

    def _keep_read(self) -> None:
        """In an idle moment, once nothing is left to build: what the app made since the last
        freeze collected, and frozen when it is much (``heap.keep_read``) — not by the next
        read's worker (the first comparison after stepping through the stages of the 24-layer
        trace collected 120k objects the stepper and the code screen had left: 42 ms of it)."""
        if self._timer is None and heap.grown() >= heap.FREEZE_AT and self._idle():
            heap.keep_read()

    def stop(self) -> None:
        """Stop, and drop the work left: it may hold screens about to be removed (another
        trace or rank opened); start() prepares the screens still there again, and lists the
        work done ahead anew (the steps left are of the trace open before)."""
        self._after.clear()
        self._pieces.clear()
        self._ahead = None
        self._pause()

    @property
    def done(self) -> bool:
        """Nothing left to build or work out ahead until the next start()."""
        return self._timer is None

    def _pause(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def input_seen(self) -> None:
        self.last_input = time.monotonic()

    def _idle(self) -> bool:
        if time.monotonic() - self.last_input < QUIET_S:
            return False
        stack = self.app.screen_stack
        if not stack or not self.app.is_running:
            return False  # starting, or closing
        shown = stack[-1]
        if not _loaded(shown) or _unpainted(shown):
            self._shown_since = None
            return False  # the screen on display first (the first paint)
        now = time.monotonic()
        if self._shown_since is None:
            self._shown_since = now
        if now - self._shown_since < QUIET_S:
            return False  # and painted a moment ago: on the terminal before anything else
        return not any(w.is_running for w in self.app.workers)

    async def _tick(self) -> None:
        if self._busy or not self._idle():
            return
        self._busy = True
        try:
            while True:
                if not await self._step():
                    self._pause()  # nothing left to do until the next start()
                    return
                if not (self._pieces or self._after):
                    return
                # a screen's steps go on while nothing else comes: the timer runs this in a
                # task of its own, so a key that came meanwhile is answered here, in this pause
                # (sleep(0) was one turn of the event loop: the key reached the app's queue,
                # and the next step ran before the app took it — a key waited for two steps)
                await asyncio.sleep(YIELD_S)
                if not self._idle():
                    return
        finally:
            self._busy = False

    def _finish(self, screen: Screen[Any]) -> list[Callable[[], None]]:
        return [*lay_out(self.app, screen),
                lambda: self._pieces.extend(render_pieces(screen) + render_bands(screen))]

    async def _step(self) -> bool:
        """One piece of work; False when there was none left."""
        app = self.app
        if self._pieces:  # a screen being rendered: small pieces, for PIECE_S at most
            started = time.perf_counter()
            while self._pieces and time.perf_counter() - started < PIECE_S:
                self._pieces.pop(0)()
            return True
        if self._after:  # the second half of a screen begun in an earlier moment
            self._after.pop(0)()
            return True
        stacks: dict[str, list[Screen[Any]]] = app._screen_stacks  # type: ignore[attr-defined]
        modes: dict[str, Any] = app._modes  # type: ignore[attr-defined]
        for mode in self.modes:
            if mode not in modes:
                continue
            stack = stacks.get(mode)
            if not stack:
                screen = modes[mode]()
                if await install(app, mode, screen):
                    self.built.append(mode)
                    self._prepared.add(id(screen))
                    # the rest in later moments, each short (a key pressed waits for at most
                    # one): its content (reads in workers), then laid out and rendered once
                    # those ended
                    self._after += [lambda screen=screen: screen.is_mounted
                                    and self.prepare(screen) and None,
                                    *self._finish(screen)]
                return True
            screen = stack[0]
            if screen is app.screen or not screen.is_mounted or id(screen) in self._prepared:
                continue
            self._prepared.add(id(screen))
            if self.prepare(screen):
                self._after += self._finish(screen)
                return True
        return self._work_ahead()

    def _work_ahead(self) -> bool:
        """The screens built: start a worker on the steps of ``ahead()`` left; False when
        none are."""
        if self.ahead is None:
            return False
        if self._ahead is None:
            self._ahead = list(self.ahead())
        if not self._ahead:
            return False
        steps = self._ahead

        def work() -> None:
            # a step at a time while nobody presses a key (a key pressed meanwhile stops it
            # after the step that runs: the rest waits for the next idle moment); what they
            # read is frozen out of full collections once they end (heap.reading)
            with heap.reading():
                while steps and time.monotonic() - self.last_input >= QUIET_S \
                        and self.app.is_running:
                    steps.pop(0)()  # taken first: a step that raises is not tried again
                    self.ahead_done += 1
        self.app.run_worker(work, name="work ahead", group="prebuild-ahead", thread=True,
                            exclusive=True, exit_on_error=False)
        return True
