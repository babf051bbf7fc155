"""Which Dynamo compile raised the script's error (``summary.failed_compile``), from traces
built with the torch-free writer: a compile whose failure the script caught (a fallback to
eager) is not the one when the script later raised the same type for another reason."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.format.manifest import ScriptError
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.summary import failed_compile, trace_summary

REASON = ("Constraints violated (L['x'].size()[0])! For more information, run with "
          "TORCH_LOGS=\"+dynamic\".\n  - You marked L['x'].size()[0] as dynamic but your "
          "code specialized it to be a constant (8).")


def _trace(root: Path, message: str | None, later: bool = False) -> Trace:
    """0/0 refused by Dynamo (ConstraintViolationError, no guarded code), then (``later``) a
    compile of another frame that went fine; the script raised a ConstraintViolationError whose
    message is ``message``."""
    w = TraceWriter(root, command=["tuidebug", "trace", "mark.py"])
    w.write_compile("0/0", {"graphs": [], "metrics": {
        "co_name": "f", "co_filename": "/x/mark.py", "co_firstlineno": 3,
        "fail_type": "ConstraintViolationError", "fail_reason": REASON,
        "has_guarded_code": False}})
    w.add_compile("0/0", {"graphs": []})
    if later:
        w.write_compile("1/0", {"graphs": [], "metrics": {
            "co_name": "g", "co_filename": "/x/mark.py", "co_firstlineno": 9,
            "has_guarded_code": True}})
        w.add_compile("1/0", {"graphs": []})
    w.update(script_error={"type": "ConstraintViolationError", "message": message,
                           "after_compiling": True})
    w.finish("ok")
    return Trace(root)


def test_the_compile_that_raised_is_named(tmp_path: Path) -> None:
    """The script's message is the compile's (Dynamo appends the user's stack to it)."""
    t = _trace(tmp_path / "t", REASON + "\n\nfrom user code:\n   File \"mark.py\", line 5")
    found = failed_compile(t.compiles, t.manifest.script_error)
    assert found is not None and found["in_compile"] == "0/0", found
    assert trace_summary(t)["script_error"]["in_compile"] == "0/0"


def test_a_caught_compile_error_is_not_the_one_a_later_error_of_its_type_came_from(
        tmp_path: Path) -> None:
    """The script caught 0/0's error (it ran eagerly instead), compiled another frame, then
    raised a ConstraintViolationError of its own: no compile failed it."""
    for later in (False, True):
        t = _trace(tmp_path / f"t{later}", "my own check of the shapes failed", later)
        assert failed_compile(t.compiles, t.manifest.script_error) is None, later
        assert "in_compile" not in trace_summary(t)["script_error"], later


def test_without_a_message_only_the_last_compile_is_taken(tmp_path: Path) -> None:
    """Where the error has no message to compare, the failed compile is named only when nothing
    compiled after it."""
    t = _trace(tmp_path / "a", None)
    found = failed_compile(t.compiles, t.manifest.script_error)
    assert found is not None and found["in_compile"] == "0/0", found
    t = _trace(tmp_path / "b", None, later=True)
    assert failed_compile(t.compiles, t.manifest.script_error) is None
    assert failed_compile(t.compiles, ScriptError("ValueError", REASON)) is None
