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


def _failures(root: Path, failed: list[tuple[str, str]], error: dict) -> Trace:
    """Compiles ``0/0``, ``1/0``… of one frame each, each refused by Dynamo with ``(fail_type,
    fail_reason)``; the script then raised ``error`` (a ScriptError's fields)."""
    w = TraceWriter(root, command=["tuidebug", "trace", "train.py"])
    for i, (kind, reason) in enumerate(failed):
        cid = f"{i}/0"
        w.write_compile(cid, {"graphs": [], "metrics": {
            "co_name": f"f{i}", "co_filename": "/x/train.py", "co_firstlineno": 10 * i + 1,
            "fail_type": kind, "fail_reason": reason, "has_guarded_code": False}})
        w.add_compile(cid, {"graphs": []})
    w.update(script_error={"after_compiling": True, **error})
    w.finish("ok")
    return Trace(root)


HINT = ("\n\nSet TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially "
        "if you're reporting a bug to PyTorch). For even more developer context, set "
        "TORCH_LOGS=\"+dynamo\"\n")
BACKEND_A = "backend='inductor' raised:\nRuntimeError: shapes do not match in mm"
BACKEND_B = "backend='inductor' raised:\nAssertionError: buffer not allocated"
PRINT = ("Failed to trace builtin operator\n  Explanation: Dynamo does not know how to trace "
         "builtin operator `print` with argument types ['str'] (has_kwargs False)")


def _named(t: Trace) -> str | None:
    found = failed_compile(t.compiles, t.manifest.script_error)
    assert (found or {}).get("in_compile") == trace_summary(t)["script_error"].get("in_compile")
    return None if found is None else found["in_compile"]


def test_a_backend_failure_is_told_by_the_error_it_wraps(tmp_path: Path) -> None:
    """Two compiles whose backend raised (``BackendCompilerFailed``: the same first line,
    ``backend='inductor' raised:``, whatever the backend raised): the script's error names
    the one whose wrapped error it is. Before, the last of the type was named on its first
    line alone: 1/0 for 0/0's error."""
    failed = [("BackendCompilerFailed", BACKEND_A), ("BackendCompilerFailed", BACKEND_B)]
    t = _failures(tmp_path / "a", failed, {"type": "BackendCompilerFailed",
                                           "message": BACKEND_A + HINT})
    assert _named(t) == "0/0"
    t = _failures(tmp_path / "b", failed, {"type": "BackendCompilerFailed",
                                           "message": BACKEND_B + HINT})
    assert _named(t) == "1/0"
    other = "backend='inductor' raised:\nRuntimeError: out of memory"
    t = _failures(tmp_path / "c", failed, {"type": "BackendCompilerFailed",
                                           "message": other + HINT})
    assert _named(t) is None  # neither: none named


def test_the_wrapped_error_raised_again_names_its_compile(tmp_path: Path) -> None:
    """The script caught ``BackendCompilerFailed`` and raised the backend's own error
    (``e.inner_exception``): a RuntimeError the compile's failure holds as its own line."""
    failed = [("BackendCompilerFailed", BACKEND_A), ("BackendCompilerFailed", BACKEND_B)]
    t = _failures(tmp_path / "t", failed, {"type": "RuntimeError",
                                           "message": "shapes do not match in mm"})
    assert _named(t) == "0/0"
    t = _failures(tmp_path / "u", failed, {"type": "RuntimeError", "message": "shapes do not"})
    assert _named(t) is None  # a part of the line is not the error


def test_an_error_raised_from_the_compiles_names_it(tmp_path: Path) -> None:
    """``raise RuntimeError("training step failed") from e``: the compile's error is the
    cause its traceback prints. One the script raised while handling it (no ``from``) is not
    the compile's: it is not named."""
    cause = ("Traceback (most recent call last):\n  File \"/x/train.py\", line 3, in <module>\n"
             f"torch._dynamo.exc.Unsupported: {PRINT}\n\nfrom user code:\n   File "
             f"\"/x/train.py\", line 2, in f0\n{HINT}\n")
    tail = ("\nTraceback (most recent call last):\n  File \"/x/train.py\", line 5, in <module>\n"
            "RuntimeError: training step failed\n")
    failed = [("Unsupported", PRINT), ("BackendCompilerFailed", BACKEND_B)]
    for link, named in (("The above exception was the direct cause of the following "
                         "exception:", "0/0"),
                        ("During handling of the above exception, another exception "
                         "occurred:", None)):
        t = _failures(tmp_path / str(named), failed, {
            "type": "RuntimeError", "message": "training step failed",
            "traceback": cause + "\n" + link + "\n" + tail})
        assert _named(t) == named, link


def test_a_prefix_before_the_compiles_message_still_names_it(tmp_path: Path) -> None:
    """The script raised the error again with a prefix (``type(e)(f"step 3: {e}")``); and
    the last compile failed with another error of the type: the earlier one is named (before:
    none, the last of the type not being it, nor the first line the same)."""
    failed = [("Unsupported", PRINT), ("Unsupported", "Graph break in user code\n  x")]
    t = _failures(tmp_path / "t", failed, {"type": "Unsupported",
                                           "message": "step 3: " + PRINT + "\n\nfrom user code"})
    assert _named(t) == "0/0"
