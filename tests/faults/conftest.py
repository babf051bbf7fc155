"""The faults suite: each case records whether tuidebug survived it and whether data was lost;
a summary table is printed at the end of the run (data lost must be 0)."""

from __future__ import annotations

import json
from pathlib import Path


from tests.conftest import Case  # noqa: F401  (the faults tests import it from here)


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
