"""Every key of the terminal UI, in one table.

Each entry has a stable id (users remap keys with ``App.set_keymap({id: "keys"})``), the action it
runs, and the words shown in the footer, the help screen and the command palette — all three are
generated from this table, so they cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class Key:
    id: str
    keys: str
    action: str
    description: str
    scope: str  # "app", "screen" (every trace screen) or a screen's name
    show: bool = True  # in the footer
    palette: bool = True  # offered in the command palette
    help: str = ""  # a longer explanation for the help screen and palette


SCREENS = ("overview", "passes", "ir", "code", "autotune", "errors", "flags", "compare",
           "shapes", "profile")
SCREEN_TITLES = {"overview": "Overview", "passes": "Passes", "ir": "IR & fusion",
                 "code": "Code", "autotune": "Autotune", "errors": "Errors", "flags": "Flags",
                 "compare": "Compare", "shapes": "Shapes", "profile": "Profile",
                 "ranks": "Ranks"}
SCREEN_SHORT_TITLES = {"overview": "Over", "passes": "Pass", "ir": "IR", "code": "Code",
                       "autotune": "Tune", "errors": "Err", "flags": "Flag", "compare": "Cmp",
                       "shapes": "Shape", "profile": "Prof", "ranks": "Ranks"}


def screen_key(i: int) -> str:
    """The key of the ``i``-th screen of SCREENS: 1 … 9, then 0 for the tenth."""
    return str((i + 1) % 10)


KEYS: list[Key] = [
    # -- everywhere --
    *[Key(f"app.screen.{name}", screen_key(i), f"app.show_screen('{name}')",
          SCREEN_TITLES[name], "app", show=False,
          help=f"switch to the {SCREEN_TITLES[name].lower()} screen")
      for i, name in enumerate(SCREENS)],
    Key("app.graph", "G", "app.pick_graph", "Graph", "app",
        help="choose the compiled graph to look at (forward, backward, …)"),
    Key("app.next_graph", "ctrl+right", "app.cycle_graph(1)", "Next graph", "app", show=False,
        help="look at the next compiled graph"),
    Key("app.prev_graph", "ctrl+left", "app.cycle_graph(-1)", "Previous graph", "app", show=False,
        help="look at the previous compiled graph"),
    Key("app.rank", "R", "app.pick_rank", "Ranks", "app", show=False,
        help="a distributed job: the ranks screen (every rank × its compiles, the first "
             "divergence; open another rank there); an imported multi-rank TORCH_TRACE log: "
             "open another rank"),
    Key("app.help", "question_mark,f1", "app.help", "Help", "app",
        help="list every key"),
    Key("app.compare_with", "C", "app.compare_with", "Compare with trace…", "app", show=False,
        help="compare with trace…: diff this trace against another trace directory"),
    Key("app.quit", "q", "app.quit", "Quit", "app", help="leave tuidebug"),
    # -- every trace screen --
    Key("screen.search", "slash", "search", "Search", "screen",
        help="search the focused view (enter: next match, escape: close)"),
    Key("screen.search_next", "f3", "search_next", "Next match", "screen", show=False,
        help="jump to the next match of the last search"),
    Key("screen.search_prev", "shift+f3", "search_prev", "Previous match", "screen", show=False,
        help="jump to the previous match of the last search"),
    Key("screen.focus_next", "tab", "app.focus_next", "Next pane", "screen", show=False,
        palette=False, help="move the focus to the next pane"),
    Key("screen.export", "e", "export_svg", "Export SVG", "screen",
        help="write the graph on screen to an SVG file"),
    # -- overview --
    Key("overview.advise", "a", "advise_try", "Try advice", "overview",
        help="try the advice: after showing what runs, re-run the script once as traced and "
             "once per suggestion that needs no edit of your files; each is then marked "
             "verified or tried (as tuidebug advise TRACE --try)"),
    # -- pass stepper --
    Key("passes.next", "n", "step(1)", "Next pass", "passes",
        help="select the next stage or pass"),
    Key("passes.prev", "p", "step(-1)", "Prev pass", "passes",
        help="select the previous stage or pass"),
    Key("passes.next_changed", "right_square_bracket", "step_changed(1)", "Next change",
        "passes", help="select the next pass that changed the graph"),
    Key("passes.prev_changed", "left_square_bracket", "step_changed(-1)", "Prev change",
        "passes", show=False, help="select the previous pass that changed the graph"),
    Key("passes.kernel", "k", "node_kernel", "Kernel", "passes",
        help="show the kernel that computes the FX node under the cursor (also: enter)"),
    Key("passes.changes_only", "c", "toggle_changes_only", "Changes only", "passes",
        help="show only the nodes the selected pass added, removed or changed"),
    # -- IR and fusion --
    Key("ir.text", "t", "toggle_text", "IR text", "ir",
        help="switch between the structured IR and Inductor's own text dump"),
    Key("ir.rejected", "r", "toggle_rejected", "Fused/rejected", "ir",
        help="show all fusion decisions, or only the rejected ones"),
    # -- code --
    Key("code.wrapper", "w", "show_wrapper", "Wrapper", "code",
        help="show the wrapper (the Python that calls every kernel)"),
    Key("code.fx", "f", "kernel_fx", "FX nodes", "code",
        help="show the FX nodes of the selected kernel in the pass stepper"),
    Key("code.source", "s", "kernel_source", "Source", "code",
        help="show the user's source line the selected kernel came from"),
    # -- errors --
    Key("errors.minify", "m", "minify", "Minify", "errors",
        help="shrink the failed graph into a standalone repro.py (in worker processes)"),
    Key("errors.bisect", "b", "bisect", "Bisect", "errors",
        help="name the backend / Inductor pass the failure needs (compiler bisector)"),
    Key("errors.open_repro", "o", "open_repro", "Open repro", "errors",
        help="open the minified repro.py in a text view (also: enter on the result)"),
    Key("errors.cancel", "x", "cancel_task", "Cancel", "errors",
        help="cancel the running minify or bisect"),
    # -- flags --
    Key("flags.filter", "f", "focus_filter", "Filter", "flags",
        help="type to filter the flags by name or documentation"),
    Key("flags.edit", "s", "edit_flag", "Set value", "flags",
        help="set a new value for the selected flag (also: enter)"),
    Key("flags.unset", "u", "unset_flag", "Unset", "flags",
        help="drop the pending change of the selected flag"),
    Key("flags.recompile", "r", "recompile", "Recompile", "flags",
        help="recompile this trace with the pending changes in the warm worker (into a new "
             "trace; this one is never modified)"),
    Key("flags.cancel", "x", "cancel_recompile", "Cancel", "flags",
        help="cancel the running recompile"),
    # -- profile --
    Key("profile.table", "t", "next_table", "Kernels/nodes/lines/modules", "profile",
        help="show the time per kernel call, per FX node, per source line or per module"),
    # -- compare --
    Key("compare.open", "o", "open_new", "Open new trace", "compare",
        help="open the compared (new) trace in the app"),
    # -- ranks --
    Key("ranks.diff", "d", "diff_rank", "Diff ranks", "ranks",
        help="compare the open rank with the selected one, on the diverging graph (also: "
             "enter)"),
    Key("ranks.open", "o", "open_selected", "Open rank", "ranks",
        help="open the selected rank on the screen shown before this one"),
]


def keys_for(scope: str) -> list[Key]:
    return [k for k in KEYS if k.scope == scope]


def bindings(scope: str) -> list[Binding]:
    return [Binding(k.keys, k.action.removeprefix("app.") if scope == "app" else k.action,
                    k.description, show=k.show, id=k.id, tooltip=k.help)
            for k in keys_for(scope)]


def display_keys(keys: str) -> str:
    names = {"question_mark": "?", "slash": "/", "right_square_bracket": "]",
             "left_square_bracket": "[", "ctrl+right": "ctrl+→", "ctrl+left": "ctrl+←",
             "pagedown": "PgDn", "pageup": "PgUp"}
    return " ".join(names.get(k, k) for k in keys.split(","))


# Keys handled by the widgets themselves, listed on the help screen.
VIEW_KEYS: list[tuple[str, str]] = [
    ("↑ ↓", "move the cursor"),
    ("PgUp PgDn space", "page up / down"),
    ("home end", "first / last line"),
    ("← →", "scroll sideways (long lines)"),
    ("enter", "open what is under the cursor (a kernel, an FX node, a source line)"),
    ("ctrl+p", "command palette: every action, every graph, every kernel by name"),
]
