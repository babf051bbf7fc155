"""A size marked dynamic (``torch._dynamo.mark_dynamic``) that the code specializes: Dynamo
refuses the compile (ConstraintViolationError) and torch.compile raises it into the script.
``advise`` said "no suggestion" though Dynamo's own message names the fix. The trace is built
with the torch-free writer, its records as torch 2.13 writes them for a script that marks
``x`` dynamic and then branches on ``if x.shape[0] == 8:``."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.advice import suggestions

REASON = ("Constraints violated (L['x'].size()[0])! For more information, run with "
          "TORCH_LOGS=\"+dynamic\".\n  - You marked L['x'].size()[0] as dynamic but your code "
          "specialized it to be a constant (8). If you're using mark_dynamic, either remove it "
          "or use maybe_mark_dynamic.")


def _trace(root: Path, fail_reason: str) -> Trace:
    w = TraceWriter(root, command=["tuidebug", "trace", "mark.py"])
    w.add_graph("0_0-inference", kind="inference", compile_id="0/0")
    w.write_compile("0/0", {"graphs": ["0_0-inference"], "metrics": {
        "co_name": "f", "co_filename": "/home/u/mark.py", "co_firstlineno": 3,
        "fail_type": "ConstraintViolationError" if fail_reason else None,
        "fail_reason": fail_reason or None, "has_guarded_code": not fail_reason}})
    w.add_compile("0/0", {"graphs": ["0_0-inference"]})
    w.write_compile_shapes("0/0", {"id": "0/0", "symbols": [
        {"name": "s77", "source": "L['x'].size()[0]", "sources": ["L['x'].size()[0]"],
         "kind": "backed", "hint": 8, "range": "Eq(s77, 8)"}],
        "specializations": [{
            "symbol": "s77", "source": "L['x'].size()[0]", "sources": ["L['x'].size()[0]"],
            "value": 8, "reason": "range_refined_to_singleton", "guard": "Eq(s77, 8)",
            "user_line": {"file": "/home/u/mark.py", "line": 4, "fn": "f",
                          "code": "if x.shape[0] == 8:"}}]})
    w.finish("ok")
    return Trace(root)


def test_a_marked_size_the_code_specializes_gets_maybe_mark_dynamic(tmp_path: Path) -> None:
    found = {s.id: s for s in suggestions(_trace(tmp_path / "t", REASON))}
    assert list(found) == ["maybe_mark_dynamic x 0"], list(found)
    s = found["maybe_mark_dynamic x 0"]
    assert s.apply is None and s.about == "compile failure", s
    assert "torch._dynamo.maybe_mark_dynamic(x, 0)" in s.text, s.text
    assert "mark.py:4" in s.text and "if x.shape[0] == 8:" in s.why, s
    assert "specialized it to 8 (Eq(s77, 8))" in s.why, s.why
    assert "0/0" in s.why and "ConstraintViolationError" in s.why, s.why


def test_a_size_specialized_without_a_mark_gets_no_such_advice(tmp_path: Path) -> None:
    """The same specialization in a compile that did not fail (nothing marked): a size the code
    needs is no mistake, and there is nothing to unmark."""
    assert not [s for s in suggestions(_trace(tmp_path / "t", "")) if "mark" in s.id]
