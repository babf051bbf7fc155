"""bench/cli_speed.py measures a whole command against another checkout: here this checkout
against itself on a committed trace, once each."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_cli_speed_reports_cpu_rss_and_ratio(mlp_trace: Path) -> None:
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "cli_speed.py"), "--repeat", "2",
                        "--against", str(ROOT), "--", "info", str(mlp_trace)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = re.findall(r"^  (this|other) .* CPU (\d+\.\d+) \[(\d+\.\d+)–(\d+\.\d+)\] s   "
                      r"peak RSS (\d+) ", p.stdout, re.M)
    assert [r[0] for r in rows] == ["this", "other"], p.stdout
    for _, median, low, high, rss in rows:
        assert 0 < float(low) <= float(median) <= float(high) < 60 and int(rss) > 10
    ratio = re.search(r"CPU this / other per pair: (\d+\.\d+) ", p.stdout)
    assert ratio is not None and 0.2 < float(ratio[1]) < 5, p.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "bench" / "cli_speed.py"), "--repeat", "1",
                          "--", "info", str(mlp_trace / "no-such")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "failed" in bad.stderr
