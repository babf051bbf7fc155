"""The table ``tuidebug flags`` prints (rich), drawn from flags and values given to it.

The registry itself lives in :mod:`tuidebug.compiler.flags`; this module only renders what it is
handed (it imports nothing from the compiler layer).
"""

from __future__ import annotations

from typing import Any, Sequence

UNKNOWN_NOTE = ("current ?: not computable without importing torch (the default reads "
                "torch.version, the CPU count, …)")


def print_flags(flags: Sequence[Any], in_force: Any, console: Any) -> None:
    """The table, and a note on ``?`` when some current value could not be computed."""
    from rich.text import Text

    console.print(flags_table(flags, in_force))
    if any(f.name not in in_force.current for f in flags):
        console.print(Text(UNKNOWN_NOTE, style="dim"))


def print_no_match(pattern: str | None, close: Sequence[str], console: Any) -> None:
    """What ``tuidebug flags PATTERN`` says when nothing matches (``close``: names to suggest)."""
    from rich.text import Text

    hint = f"; did you mean: {', '.join(close)}?" if close else ""
    console.print(Text(f"no Inductor flag matches {pattern!r}{hint}", style="red"))


# column: (style, max width); the name folds, so that the doc column survives in 80 columns
_COLUMNS = (("name", "bold cyan", 36), ("type", "magenta", 18), ("default", "green", 30),
            ("current", "", 16), ("env", "yellow", 30))


def flags_table(flags: Sequence[Any], in_force: Any) -> Any:
    """A rich table of ``flags`` (:class:`~tuidebug.compiler.flags.Flag`): name, type, default,
    current value (``in_force``: :class:`~tuidebug.compiler.flags.InForce`), environment, doc."""
    from rich.table import Table
    from rich.text import Text

    title = f"{len(flags)} Inductor flag{'s' if len(flags) > 1 else ''}"
    table = Table(title=title, title_justify="left")
    for column, style, width in _COLUMNS:
        table.add_column(column, style=style, overflow="fold", max_width=width)
    table.add_column("doc", ratio=1, min_width=10)
    for f in flags:
        table.add_row(Text(f.name), Text(f.type), _default_cell(f, in_force),
                      _current_cell(f, in_force), Text(", ".join(f.env)), Text(f.summary))
    return table


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _default_cell(f: Any, in_force: Any) -> Any:
    """The default; for one computed from the environment, its source and ``= value``."""
    from rich.text import Text

    if f.default_known:
        return Text(_short(repr(f.default)))
    cell = Text(_short(str(f.default_repr)), style="dim")
    if f.name in in_force.defaults:
        cell.append(f"\n= {_short(repr(in_force.defaults[f.name]))}", style="green")
    return cell


def _current_cell(f: Any, in_force: Any) -> Any:
    """The value in force in this process; bold yellow where the environment overrides the
    default."""
    from rich.text import Text

    if f.name not in in_force.current:
        return Text("?", style="dim")
    value = in_force.current[f.name]
    default = f.default if f.default_known else in_force.defaults.get(f.name, value)
    return Text(_short(repr(value), 40), style="bold yellow" if value != default else "")

