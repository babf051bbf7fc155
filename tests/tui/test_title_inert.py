"""The title bar shows what comes from a trace inert: a graph id (a folder name may hold an escape
sequence), the manifest's status and an imported rank reached the terminal as they were."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "cuda_mlp_autotune"  # a real trace, no compile needed
ESC = "\x1b[2J\x1b]52;c;cHduZWQ=\x07"


async def test_title_bar_shows_trace_strings_inert(open_ui, tmp_path: Path) -> None:
    t = tmp_path / "t"
    shutil.copytree(FIXTURE, t)
    m = json.loads((t / "manifest.json").read_text())
    gid = f"g[reverse]{ESC}x"
    os.rename(t / "graphs" / m["graphs"][0]["id"], t / "graphs" / gid)
    m["graphs"][0]["id"] = gid
    m["status"] = f"ok{ESC}"
    m["imported_from"] = {"rank": f"1{ESC}", "ranks": [0, 1], "path": str(tmp_path / "log")}
    (t / "manifest.json").write_text(json.dumps(m))
    async with open_ui(t, size=(220, 40)) as ui:
        title = ui.text().splitlines()[0]
        assert "\x1b" not in title and "\x07" not in title, repr(title)
        assert "g[reverse]\\x1b[2J" in title, repr(title)  # the id as written, escapes visible
        assert "OK\\x1b[2J" in title and "rank 1\\x1b" in title, repr(title)
