"""bench/trace_size.py on a committed trace: its bytes by kind of file as stored and as held
(decompressed), each snapshot beside its delta against the one before, and the content's total
with deltas (never more than the content)."""

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
    m = re.search(r": (\d+\.\d+) MB stored, (\d+\.\d+) MB of content\n", p.stdout)
    assert m is not None, p.stdout
    total, content = float(m[1]), float(m[2])
    kinds = re.findall(r"^  (\S.*?) +(\d+\.\d+) MB +\d+%   \(content +(\d+\.\d+) MB\)$",
                       p.stdout, re.M)
    assert "snapshots" in {k for k, _, _ in kinds}, p.stdout
    assert abs(sum(float(s) for _, s, _ in kinds) - total) < 0.01 * len(kinds) + 0.01
    assert abs(sum(float(c) for _, _, c in kinds) - content) < 0.01 * len(kinds) + 0.01
    for _, stored, held in kinds:
        assert float(stored) <= float(held) + 0.01  # compressed files hold more than they take
    deltas = re.findall(r"-> delta (\d+\.\d+) MB \((\d+)/(\d+) nodes as names\)", p.stdout)
    assert deltas, p.stdout  # a graph with more than one snapshot: compared
    for _, same, nodes in deltas:
        assert 0 <= int(same) <= int(nodes)
    after = re.search(r"content with deltas: (\d+\.\d+) MB of (\d+\.\d+) MB \((\d\.\d+); "
                      r"stored: (\d+\.\d+) MB\)", p.stdout)
    assert after is not None and float(after[1]) <= float(after[2]) == content
    assert 0 < float(after[3]) <= 1 and float(after[4]) == total
