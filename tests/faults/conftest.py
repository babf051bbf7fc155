"""The faults suite: each case records whether tuidebug survived it and whether data was lost;
a summary table is printed at the end of the run (data lost must be 0)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

_CASES: list["Case"] = []


@dataclass
class Case:
    name: str
    survived: bool = False
    data_lost: bool = True
    note: str = ""


@pytest.fixture
def case(request: pytest.FixtureRequest) -> Iterator[Case]:
    """A fault case. The test sets ``survived`` and ``data_lost`` as it checks them."""
    c = Case(request.node.name)
    _CASES.append(c)
    yield c


def all_files_parse(root: Path) -> list[str]:
    """Every JSON / JSONL file in a trace parses (JSONL: every line but a torn last one)."""
    bad = []
    for p in root.rglob("*"):
        if p.suffix == ".json":
            try:
                json.loads(p.read_text())
            except (ValueError, UnicodeDecodeError) as e:
                bad.append(f"{p}: {e}")
        elif p.suffix == ".jsonl":
            lines = p.read_text().splitlines()
            for i, line in enumerate(lines):
                try:
                    json.loads(line)
                except ValueError as e:
                    if i != len(lines) - 1:
                        bad.append(f"{p}:{i + 1}: {e}")
    return bad


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _CASES:
        return
    tr = terminalreporter
    tr.section("faults summary")
    tr.write_line(f"{'case':60} {'survived':>9} {'data lost':>10}")
    for c in _CASES:
        tr.write_line(f"{c.name[:60]:60} {('yes' if c.survived else 'NO'):>9} "
                      f"{('YES' if c.data_lost else 'no'):>10}  {c.note}")
    survived = sum(c.survived for c in _CASES)
    lost = sum(c.data_lost for c in _CASES)
    tr.write_line(f"cases tried: {len(_CASES)}, survived: {survived}, data lost: {lost}")
