"""bench/trace_size.py on a committed trace: its bytes by kind of file, each snapshot beside its
delta against the one before, and the total with deltas (never more than the trace)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_trace_size_counts_the_trace_and_its_deltas(transformer4_trace: Path) -> None:
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "trace_size.py"),
                        str(transformer4_trace)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    total = float(re.search(r": (\d+\.\d+) MB\n", p.stdout)[1])  # type: ignore[index]
    kinds = re.findall(r"^  (\S.*?) +(\d+\.\d+) MB +\d+%$", p.stdout, re.M)
    assert "snapshots" in {k for k, _ in kinds}, p.stdout
    assert abs(sum(float(s) for _, s in kinds) - total) < 0.01 * len(kinds) + 0.01
    deltas = re.findall(r"-> delta (\d+\.\d+) MB \((\d+)/(\d+) nodes as names\)", p.stdout)
    assert deltas, p.stdout  # a graph with more than one snapshot: compared
    for _, same, nodes in deltas:
        assert 0 <= int(same) <= int(nodes)
    after = re.search(r"with deltas: (\d+\.\d+) MB of (\d+\.\d+) MB \((\d\.\d+)\)", p.stdout)
    assert after is not None and float(after[1]) <= float(after[2]) == total
    assert 0 < float(after[3]) <= 1
