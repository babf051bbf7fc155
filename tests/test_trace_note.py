"""The note ``tuidebug trace`` prints when the script ends says what ``info`` says of the same
trace: the compile whose error the script raised (``summary.script_outcome``), from traces
built with the torch-free writer as the capture writes them — the manifest's compile summaries
hold the failure's type, not its reason (that is in ``compiles/<id>.json``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tuidebug.cli.compiling import trace_outcome
from tuidebug.cli.viewing import print_info
from tuidebug.trace.format.writer import TraceWriter

HINT = ("\n\nSet TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially "
        "if you're reporting a bug to PyTorch).\n")
PRINT = ("Failed to trace builtin operator\n  Explanation: Dynamo does not know how to trace "
         "builtin operator `print` with argument types ['str'] (has_kwargs False)")
BACKEND = "backend='inductor' raised:\nRuntimeError: shapes do not match in mm"
CAUSE = ("Traceback (most recent call last):\n  File \"/x/train.py\", line 3, in <module>\n"
         f"torch._dynamo.exc.Unsupported: {PRINT}\n{HINT}\n\nThe above exception was the direct "
         "cause of the following exception:\n\nTraceback (most recent call last):\n  File "
         "\"/x/train.py\", line 5, in <module>\nRuntimeError: training step failed\n")


def _trace(root: Path, error: dict, graphs: bool) -> Path:
    """0/0 refused by Dynamo (Unsupported), 1/0 whose backend raised (BackendCompilerFailed),
    and (``graphs``) 2/0 that compiled a graph; the script raised ``error``."""
    w = TraceWriter(root, command=["tuidebug", "trace", "train.py"])
    failed = [("Unsupported", PRINT), ("BackendCompilerFailed", BACKEND)]
    for i, (kind, reason) in enumerate(failed):
        cid, code = f"{i}/0", {"co_name": f"f{i}", "co_filename": "/x/train.py",
                               "co_firstlineno": 10 * i + 1}
        w.write_compile(cid, {"graphs": [], "metrics": {
            **code, "fail_type": kind, "fail_reason": reason, "has_guarded_code": False}})
        # the manifest's summary, as the capture writes it (events._SUMMARY): no reason
        w.add_compile(cid, {"graphs": [], "summary": {**code, "fail_type": kind}})
    if graphs:
        w.write_compile("2/0", {"graphs": ["g0"], "metrics": {
            "co_name": "g", "co_filename": "/x/train.py", "co_firstlineno": 40,
            "has_guarded_code": True}})
        w.add_compile("2/0", {"graphs": ["g0"], "summary": {"co_name": "g"}})
        w.add_graph("g0", kind="inference", compile_id="2/0")
        w.set_graph_status("g0", "ok")
    w.update(script_error={"after_compiling": graphs, **error})
    w.finish("ok")
    return root


NAMED = re.compile(r"Dynamo's compile (\S+) \(([^)]*)\)")

ERRORS = {  # the script's error -> the compile info names
    "raised from": ({"type": "RuntimeError", "message": "training step failed",
                     "traceback": CAUSE}, "0/0"),
    "the wrapped error raised again": ({"type": "RuntimeError",
                                        "message": "shapes do not match in mm"}, "1/0"),
    "a prefix": ({"type": "Unsupported", "message": "step 3: " + PRINT + HINT}, "0/0"),
    "none of them": ({"type": "RuntimeError", "message": "out of memory"}, None),
}


@pytest.mark.parametrize("graphs", [True, False], ids=["after compiling", "no graph"])
@pytest.mark.parametrize("case", list(ERRORS))
def test_the_note_names_the_compile_info_names(tmp_path: Path, capsys: pytest.CaptureFixture,
                                               case: str, graphs: bool) -> None:
    """Before, the note judged from the manifest's summaries (no reason): "the script raised
    after compiling" where ``info`` named the compile, for each of the first three."""
    error, compile_id = ERRORS[case]
    out = _trace(tmp_path / "t", error, graphs)
    print_info(out, as_json=False)
    info = " ".join(capsys.readouterr().out.split())
    assert trace_outcome(1, out) == 1
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[tuidebug]")]
    assert len(notes) == 1, notes
    said, named = NAMED.findall(notes[0]), NAMED.findall(info)
    assert said == named, (notes, info)
    if compile_id is None:
        assert said == [] and "the script raised" in notes[0], notes
    else:
        assert [c for c, _ in said] == [compile_id], notes
        assert said[0][1] == f"f{compile_id[0]} at train.py:{10 * int(compile_id[0]) + 1}"


def test_the_note_reads_only_the_files_of_compiles_that_failed(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture
                                                                ) -> None:
    """At the end of every ``tuidebug trace`` that raised, the note read every
    ``compiles/<id>.json`` to find the failing compile; the manifest's summaries carry
    ``fail_type``, so only those that failed are read: a damaged file of a compile that did not
    fail is not reached (before: the reader recorded it as a problem), and the answer is the
    same."""
    from tuidebug.trace.format.reader import Trace

    error, compile_id = ERRORS["raised from"]
    out = _trace(tmp_path / "t", error, graphs=True)
    (damaged,) = [p for p in (out / "compiles").iterdir() if p.name.startswith("2")]
    damaged.write_text("{not json")
    trace = Trace(out)
    failed = trace.compiles_failed()
    assert list(failed) == ["0/0", "1/0", "2/0"]
    assert failed["0/0"]["metrics"]["fail_reason"] == PRINT  # read from its file
    assert "metrics" not in failed["2/0"] and trace.problems == [], trace.problems
    assert trace.compiles and trace.problems, "the full read does reach the damaged file"
    assert trace_outcome(1, out) == 1
    (note,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[tuidebug]")]
    assert [c for c, _ in NAMED.findall(note)] == [compile_id], note
