"""Code: the wrapper and every kernel, syntax-highlighted, with each kernel's provenance.

Left: the wrapper and the kernels (generated ones first, then extern calls). Right: the code,
highlighted in a worker (a long wrapper never blocks the UI); below it the selected kernel's
provenance — its FX nodes (enter: show them in the pass stepper) and the user's source lines
(enter: show that line of the user's file). A kernel the numerics check judged is marked in the
list (``✗ first 0.31 vs 4.4e-08``: the first diverging kernel, its error against float64 and
eager's; ``✗``: wrong after it; ``✓``: matches); its
provenance starts with the verdict and each wrong buffer's node and user line, and enter on
such a kernel (or on the overview's first diverging kernel) shows its code, the provenance's
cursor on the user line that went wrong.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from tuidebug.trace.format import safefile
from tuidebug.trace.format.reader import GraphRecord
from tuidebug.trace.queries import provenance
from tuidebug.trace.queries.numerics import GraphNumerics, graph_numerics
from tuidebug.viewers.numerics_view import kernels_judged_mark
from tuidebug.tui import keymap
from tuidebug.tui.messages import Read, ShowNode
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.screens.code_docs import WRAPPER, CodeDoc, extern_call, read_code, read_source
from tuidebug.tui.screens.kernel_lines import ProvenanceLines, kernel_prompt
from tuidebug.tui.widgets.lists import PickList
from tuidebug.tui.widgets.highlight import CHUNK, Highlighted
from tuidebug.tui.widgets.textview import TextLines, TextView

HIGHLIGHTED_KEPT = 16  # highlighted files kept per screen (a 16k-line wrapper: ~1 s to lex)
QUICK_LINES = 1500  # lines lexed before a file is shown, at most (else: plain first)


class CodeScreen(TraceScreen):
    class DocRead(Read):
        """A kernel, the wrapper or a source file, as plain text (key: what was selected)."""

        data: CodeDoc

    class DocHighlighted(Read):
        """The same text, syntax-highlighted (after ``DocRead`` of the same key)."""

        data: Any  # the highlighted lines for the TextView

    SCREEN_NAME = "code"
    # the views' scrollbars stay as they are from kernel to kernel: one whose code or provenance
    # was wider or longer than the last showed a scrollbar or hid one, and the screen was laid
    # out again (20 ms, in one Down of five in the kernel list). The provenance has no
    # horizontal one (it would take one of its 8 lines): ← and → scroll it, and a line cut at
    # its right edge ends in … (TextView.render_line)
    BINDINGS = keymap.bindings("code")
    DEFAULT_CSS = """
    CodeScreen #kernels-pane { width: 34%; min-width: 30; max-width: 56;
                               border-right: solid $primary 40%; }
    CodeScreen #code-pane { width: 1fr; }
    CodeScreen #provenance { height: 9; border-top: solid $primary 40%; }
    CodeScreen #code-view { overflow: scroll scroll; }
    CodeScreen #provenance { overflow-x: hidden; overflow-y: scroll; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.kernels: dict[str, provenance.KernelInfo] = {}
        self.numerics = GraphNumerics()  # what the numerics check judged in the shown graph
        self._pending: str | None = None
        self._goto_line: tuple[Any, int] | None = None  # (key, 1-based line) once shown
        self.shown_key: Any = None
        self._highlighted: dict[tuple[Any, str, int], Highlighted] = {}  # oldest first
        # the wrapper shown last, highlighted, with its graph: an extern call shown at once
        self._wrapper: tuple[GraphRecord, str, Highlighted] | None = None
        # workers look up and add (a cancelled exclusive worker runs on until it checks)
        self._highlighted_lock = threading.Lock()

    def compose_body(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="kernels-pane"):
                yield Label("kernels", id="kernels-title", classes="pane-title")
                yield PickList(id="kernels")
            with Vertical(id="code-pane"):
                yield Label("", id="code-title", classes="pane-title")
                yield TextView(id="code-view", gutter=True, placeholder="select a kernel")
                yield TextView(id="provenance")

    def is_loaded(self) -> bool:
        return self.query_one(PickList).option_count > 0 or self.graph is None

    def show_graph(self, g: GraphRecord | None) -> None:
        lst = self.query_one(PickList)
        if g is None:
            lst.set_items([])
            return
        infos = provenance.kernel_infos(g)
        infos.sort(key=lambda k: k.kind == "extern")
        self.kernels = {k.name: k for k in infos}
        self.numerics = graph_numerics(self.trace, g.id)
        listed = sum(1 for k in infos if k.kind != "extern")
        title = Text(f"{g.id}: {provenance.generated_kernels(g) or 0} kernels")
        title.append_text(kernels_judged_mark(list(self.numerics.kernels.values())))
        title.append(f", {len(infos) - listed} extern calls" if infos else
                     " (no kernel index in this trace: none to list)")
        self.set_text("#kernels-title", title)
        items = [Option(Text("wrapper.py", style="bold cyan"), id=WRAPPER)]
        items += [Option(kernel_prompt(k, self.numerics.kernels.get(k.name)), id=k.name)
                  for k in infos]
        lst.set_items(items, highlighted=None)
        start = 1 if listed else 0
        if self._pending and self._pending in self.kernels:
            start = lst.index_of(self._pending) or start
        self._pending = None
        lst.highlighted = start
        lst.focus()

    def selected(self) -> str | None:
        opt = self.query_one(PickList).highlighted_option
        return opt.id if opt is not None else None

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        g, item = self.graph, event.option.id
        if g is None or item is None:
            return
        kernels = self.kernels
        at_once = self._extern_at_once(g, item)
        if at_once is not None:
            self.workers.cancel_group(self, "load-code")  # a read for the kernel before
            self.shown_key = (g.id, item)
            self._show_doc((g.id, item), at_once)
        else:
            self.set_text("#code-title", Text("reading…", style="dim"))
            self.load_doc((g.id, item), lambda: read_code(g, item, kernels))
        wrong = [n for n in self.numerics.nodes.values() if n.kernel == item and not n.ok]
        wrong.sort(key=lambda n: not n.first)
        prov = ProvenanceLines(kernels.get(item), self.numerics.kernels.get(item), wrong)
        # a kernel judged wrong: the cursor on the user line that went wrong (enter: open it)
        self.query_one("#provenance", TextView).set_source(prov, cursor=prov.wrong_line or 0)

    def _extern_at_once(self, g: GraphRecord, item: str) -> CodeDoc | None:
        """An extern call of the graph whose wrapper was shown last, highlighted down to the
        call's screenful: its doc, made here (the wrapper is not read again, nothing is lexed;
        a worker, its messages and a frame of their own were most of such a Down)."""
        k = self.kernels.get(item)
        held = self._wrapper
        if k is None or k.file or k.kind != "extern" or held is None or held[0] is not g:
            return None
        doc = extern_call(k, held[1], held[2])
        if held[2].lexed() < min(doc.cursor + CHUNK, len(held[2])):
            return None
        return doc

    def _held_wrapper(self, key: Any, lines: Any) -> None:
        """Keep the wrapper's highlighted lines shown for ``key`` (the wrapper or an extern
        call of the graph shown) for the extern calls selected next."""
        g = self.graph
        if g is None or not isinstance(lines, Highlighted) or not isinstance(key, tuple) \
                or len(key) != 2 or key[0] != g.id:
            return
        k = self.kernels.get(key[1])
        if key[1] == WRAPPER or (k is not None and not k.file and k.kind == "extern"):
            self._wrapper = (g, lines.code, lines)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.query_one("#code-view", TextView).focus()

    def load_doc(self, key: Any, read: Callable[[], CodeDoc]) -> None:
        """Show the text highlighted (``DocRead`` with ``highlighted``) down to what the view
        shows first — the rest is lexed as the view scrolls there — when that is at most
        ``QUICK_LINES`` (a kernel, the wrapper's top: one paint); else (an extern call deep in a
        long wrapper) at once as plain text, then again highlighted whole (``DocHighlighted``)."""
        def work() -> None:
            worker = get_current_worker()

            def cancelled() -> bool:
                return worker.is_cancelled
            doc = read()
            if not (doc.code and doc.path):
                self.post_message(self.DocRead(key, doc))
                return
            # the same file is highlighted once (every extern call shows the whole wrapper)
            done = (key[0] if isinstance(key, tuple) else key, doc.path, hash(doc.code))
            with self._highlighted_lock:
                lines = self._highlighted.get(done) or self._remember(
                    done, Highlighted(doc.code, doc.path))
            first = doc.cursor + CHUNK  # the cursor's screenful
            if lines.lexed() >= min(first, len(lines)) or first <= QUICK_LINES:
                if lines.ensure(first, cancelled) and not cancelled():
                    self.post_message(self.DocRead(key, CodeDoc(
                        doc.code, doc.path, doc.cursor, doc.title, lines)))
                    if len(lines) > QUICK_LINES:  # a long wrapper: the rest while it is read
                        lines.ensure(len(lines), cancelled)  # (an extern call jumps into it)
                return
            self.post_message(self.DocRead(key, doc))
            if not cancelled() and lines.ensure(len(lines), cancelled):
                self.post_message(self.DocHighlighted(key, lines))
        self.shown_key = key
        self.run_worker(work, name="code", group="load-code", thread=True, exclusive=True,
                        exit_on_error=False)

    def _remember(self, done: tuple[Any, str, int], lines: Highlighted) -> Highlighted:
        self._highlighted[done] = lines
        while len(self._highlighted) > HIGHLIGHTED_KEPT:
            self._highlighted.pop(next(iter(self._highlighted)))
        return lines

    def _lex_to(self, key: Any, lines: Highlighted, line: int) -> None:
        """The view drew ``line`` plain (not lexed yet, and the UI thread does not lex far):
        lex down to it in a worker, then paint the view again."""
        if key != self.shown_key:
            return

        def work() -> None:
            worker = get_current_worker()
            if lines.ensure(line + 1 + CHUNK, lambda: worker.is_cancelled) \
                    and not worker.is_cancelled:
                self.post_message(self.DocHighlighted(key, lines))
        self.run_worker(work, name="lex", group="lex-to", thread=True, exclusive=True,
                        exit_on_error=False)

    def _watch_lexing(self, key: Any, source: Any) -> None:
        if isinstance(source, Highlighted):
            source.watch(lambda i: self.call_later(self._lex_to, key, source, i))

    def on_code_screen_doc_highlighted(self, message: CodeScreen.DocHighlighted) -> None:
        if message.key != self.shown_key:
            return  # a late result for something no longer selected
        view = self.query_one("#code-view", TextView)
        self._watch_lexing(message.key, message.data)
        self._held_wrapper(message.key, message.data)
        view.set_source(message.data, cursor=view.cursor, keep_scroll=True)
        view.set_query(self.search_query)
        self._apply_goto_line()

    def on_code_screen_doc_read(self, message: CodeScreen.DocRead) -> None:
        if message.key != self.shown_key:
            return  # a late result for something no longer selected
        self._show_doc(message.key, message.data)

    def _show_doc(self, key: Any, doc: CodeDoc) -> None:
        view = self.query_one("#code-view", TextView)
        self._watch_lexing(key, doc.highlighted)
        self._held_wrapper(key, doc.highlighted)
        view.set_source(doc.highlighted or TextLines(doc.code or ""), cursor=doc.cursor,
                        placeholder="(not available)" if doc.code is None else "(empty)")
        view.set_query(self.search_query)
        self.set_text("#code-title", Text(doc.title, style="bold"))
        self._apply_goto_line()

    def goto_kernel(self, name: str, line: int | None = None) -> None:
        g = self.graph
        if line is not None and g is not None:
            self._goto_line = ((g.id, name), line)
        if self.shown_graph != (g.id if g else None) or not self.is_loaded():
            self._pending = name
            return
        lst = self.query_one(PickList)
        if lst.highlighted_option is not None and lst.highlighted_option.id == name:
            self._apply_goto_line()
        elif not lst.select_id(name):
            self.notify(f"no kernel {name} in this graph", severity="warning")
            return
        self.query_one("#code-view", TextView).focus()

    def _apply_goto_line(self) -> None:
        if self._goto_line is not None and self._goto_line[0] == self.shown_key:
            view = self.query_one("#code-view", TextView)
            if view.line_count:
                view.move_to(self._goto_line[1] - 1)
                self._goto_line = None

    # -- provenance ----------------------------------------------------------------------------

    def on_text_view_activated(self, event: TextView.Activated) -> None:
        if event.view.id != "provenance":
            return
        src = event.view.source
        if not isinstance(src, ProvenanceLines):
            return
        kind, value, _ = src.items[event.index]
        if kind == "fx":
            self._show_fx(value)
        elif kind == "source":
            path, line = value.split("\x00")
            self._show_source(path, safefile.to_int(line, 1))

    def _kernel(self) -> provenance.KernelInfo | None:
        item = self.selected()
        return self.kernels.get(item) if item else None

    def _show_fx(self, node: str | None = None) -> None:
        g, k = self.graph, self._kernel()
        if g is None or k is None or not k.fx_nodes:
            self.notify("select a kernel with recorded FX nodes first", severity="warning")
            return
        self.app.post_message(ShowNode(
            g.id, node or k.fx_nodes[0], marks=k.fx_nodes,
            reason=f"{k.name} computes {len(k.fx_nodes)} FX node(s), highlighted"))

    def _show_source(self, path: str, line: int) -> None:
        g = self.graph
        if g is None:
            return
        k = self._kernel()
        prefer = list(k.source) if k is not None else []  # its frames' code wins at their lines
        self.load_doc((g.id, path, line), lambda: read_source(self.trace, path, line, prefer))
        self.query_one("#code-view", TextView).focus()

    def action_kernel_fx(self) -> None:
        self._show_fx()

    def action_kernel_source(self) -> None:
        k = self._kernel()
        if k is None or not k.source:
            self.notify("no source line recorded for this kernel", severity="warning")
            return
        s = k.source[0]
        self._show_source(str(s.get("file")), int(s.get("line") or 1))

    def action_show_wrapper(self) -> None:
        self.query_one(PickList).select_id(WRAPPER)

    def svg_request(self) -> dict[str, Any] | None:
        g = self.graph
        return {"graph_id": g.id, "kernels": True} if g is not None else None
