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
# the size the code specialized: ``if x.shape[0] == 8:``
SPECIALIZED = {"symbol": "s77", "source": "L['x'].size()[0]", "sources": ["L['x'].size()[0]"],
               "value": 8, "reason": "range_refined_to_singleton", "guard": "Eq(s77, 8)",
               "user_line": {"file": "/home/u/mark.py", "line": 4, "fn": "f",
                             "code": "if x.shape[0] == 8:"}}


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
        "specializations": [SPECIALIZED]})
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


def test_only_a_compile_dynamo_refused_for_a_mark_is_read(tmp_path: Path) -> None:
    """``marked_advice`` runs in every ``suggestions()`` (info, the overview): it read every
    compile's shapes and FX snapshot to find the one Dynamo refused for a mark. Of twenty
    compiles (0/0 refused, 1/0…19/0 fine), only 0/0's shapes are read."""
    from tuidebug.trace.queries.marked_dynamic import marked_advice

    t = _many(tmp_path / "many")
    found = marked_advice(t)
    assert [a.id for a in found] == ["maybe_mark_dynamic x 0"], found
    read = set(t.__dict__.get("_shapes_brief_cache") or {})
    assert read == {"0/0"}, sorted(read)


def _many(root: Path) -> Trace:
    """0/0 refused for a mark (as ``_trace``), then 1/0…19/0 compiled fine, each with shapes."""
    w = TraceWriter(root, command=["tuidebug", "trace", "mark.py"])
    for i in range(20):
        cid = f"{i}/0"
        w.write_compile(cid, {"graphs": [], "metrics": {
            "co_name": f"f{i}", "co_filename": "/home/u/mark.py", "co_firstlineno": 3,
            "fail_type": None if i else "ConstraintViolationError",
            "fail_reason": None if i else REASON, "has_guarded_code": bool(i)}})
        w.add_compile(cid, {"graphs": []})
        w.write_compile_shapes(cid, {"id": cid, "symbols": [], "specializations": [SPECIALIZED]})
    w.finish("ok")
    return Trace(root)
