"""The command palette (ctrl+p): every action of the keymap, every graph, every kernel."""

from __future__ import annotations

from functools import partial
from typing import Callable

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.markup import escape

from tuidebug.tui import keymap
from tuidebug.tui.messages import GraphChosen, ShowKernel


class TraceCommands(Provider):
    """Context-aware: the current screen's actions first, then graphs and kernels."""

    def _commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        screen = self.screen
        scope = getattr(screen, "SCREEN_NAME", "")
        app = self.app
        out: list[tuple[str, str, Callable[[], object]]] = []
        for k in keymap.KEYS:
            if not k.palette or k.scope not in ("app", "screen", scope):
                continue
            title = k.description
            if k.scope == scope:
                title = f"{keymap.SCREEN_TITLES.get(scope, scope)}: {title}"
            elif k.id.startswith("app.screen."):
                title = f"Go to {title}"
            help_text = f"{k.help or k.description}   (key: {keymap.display_keys(k.keys)})"
            out.append((title, help_text, partial(screen.run_action, k.action)))
        trace = getattr(app, "trace", None)
        if trace is None:
            return out
        for g in trace.graphs:
            out.append((f"Graph: {g.id}", f"look at the {g.kind} graph {g.id} ({g.status})",
                        partial(app.post_message, GraphChosen(g.id))))
        current = getattr(app, "current_graph", None)
        if current is not None:
            for kern in current.kernels:
                name = kern.name
                if kern.extern:
                    continue
                out.append((f"Kernel: {name}", f"show the {kern.kind} kernel's code and "
                            "provenance", partial(app.post_message, ShowKernel(current.id, name))))
        return out

    async def discover(self) -> Hits:
        for title, help_text, run in self._commands():
            if title.startswith("Kernel: "):
                continue  # kernels are found by typing, not listed up front
            yield DiscoveryHit(escape(title), run, help=escape(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, run in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), run, help=escape(help_text))
