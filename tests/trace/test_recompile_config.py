"""A recompile on a Python number judged with the Dynamo config the trace recorded (each
compile's ``metrics.dynamo_config``). What torch 2.13 does with ``x * n`` called with four
values of ``n`` (plain torch, TORCH_LOGS=recompiles, compiles counted)::

    default                          2 compiles   dynamic=True: 1
    automatic_dynamic_shapes=False   4            dynamic=True: 1   (dynamic=False: 4)
    specialize_int=True   (an int)   4            dynamic=True: 4
    specialize_float=True (a float)  4            dynamic=True: 4

The traces are built with the torch-free writer from what ``tuidebug trace`` recorded of that
script with ``torch.compile(f, dynamic=False)`` and with ``specialize_int = True`` (n = 2, 3,
4): no symbol in any compile, the config as recorded. Before, the advice said "this compile
did not make it a symbol: each value compiles once" and named no setting; with no shapes
record it promised "automatic dynamic makes it a symbol after one change … to compile once,
use torch.compile(dynamic=True)" under either setting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.advice import recompile_advice
from tuidebug.trace.queries.recompile_suggestion import suggestion
from tuidebug.trace.queries.recompiles import explain_compile

DEFAULTS = {"automatic_dynamic_shapes": True, "assume_static_by_default": True,
            "specialize_int": False, "specialize_float": False}
REASONS = {"0/0": [], "0/1": ["0/0: n == 2"], "0/2": ["0/1: n == 3", "0/0: n == 2"]}


def _trace(root: Path, config: dict[str, Any]) -> Trace:
    """Three compiles of ``f(x, n)``, none with a symbol, each with ``config`` recorded."""
    w = TraceWriter(root, command=["tuidebug", "trace", "cfgtrace.py"])
    for cid, rs in REASONS.items():
        graph = f"{cid.replace('/', '_')}-inference"
        w.write_compile(cid, {"graphs": [graph], "metrics": {
            "co_name": "f", "dynamo_config": json.dumps({**DEFAULTS, **config})},
            **({"recompile_reasons": rs} if rs else {})})
        w.add_compile(cid, {"graphs": [graph]})
        w.add_graph(graph, kind="inference", compile_id=cid)
        w.set_graph_status(graph, "ok")
        w.write_compile_shapes(cid, {"id": cid, "symbols": [], "specializations": [],
                                     "recompile": {"reasons": rs, "values": {}}})
    w.finish("ok")
    return Trace(root)


def _says(t: Trace, present: list[str], absent: list[str]) -> None:
    """Each recompile's advice (0/1, 0/2) holds every phrase of ``present``, none of
    ``absent``."""
    said = [rec["suggestion"] for cid in ("0/1", "0/2")
            if (rec := explain_compile(t, cid)) is not None]
    assert len(said) == 2, said
    for text in said:
        assert all(p in text for p in present), (present, text)
        assert not any(p in text for p in absent), (absent, text)


def test_automatic_dynamic_off_names_the_setting_and_what_compiles_once(
        tmp_path: Path) -> None:
    t = _trace(tmp_path / "t", {"automatic_dynamic_shapes": False})
    _says(t, ["automatic dynamic shapes are off here", "every new value compiles again",
              "to compile once, use torch.compile(dynamic=True)"], ["reuse it"])
    (s,) = recompile_advice(t)
    assert s.id == "dynamic=True" and "automatic dynamic shapes are off" in s.why, s
    # no shapes record (an import): no promise that automatic dynamic makes it a symbol
    said, _, _, _ = suggestion("n == 2", {"automatic_dynamic_shapes": False}, None)
    assert "makes it a symbol after one change unless" not in said, said
    assert "automatic dynamic shapes are off here" in said, said


def test_specialize_int_names_the_setting_and_promises_no_dynamic_true(
        tmp_path: Path) -> None:
    t = _trace(tmp_path / "t", {"specialize_int": True})
    _says(t, ["torch._dynamo.config.specialize_int is True here",
              "torch.compile(dynamic=True) does not change that",
              "set torch._dynamo.config.specialize_int = False"],
          ["to compile once, use torch.compile(dynamic=True)"])
    (s,) = recompile_advice(t)
    assert s.id == "specialize_int=False", s
    assert s.apply is not None and s.apply.config == {"dynamo.specialize_int": False}, s
    said, _, _, _ = suggestion("n == 2", {"specialize_int": True}, None)
    assert "to compile once, use torch.compile(dynamic=True)" not in said, said


def test_each_specialize_setting_is_about_its_own_kind_of_number() -> None:
    # specialize_int does not touch a float: automatic dynamic makes it a symbol
    said, _, _, _ = suggestion("scale == 2.5", {**DEFAULTS, "specialize_int": True}, None)
    assert "specialize_int" not in said and "makes it a symbol after one change" in said, said
    assert "unless" in said  # the code may need its value (a loop count)
    said, _, _, _ = suggestion("scale == 2.5", {**DEFAULTS, "specialize_float": True}, set())
    assert "specialize_float is True here" in said and "pass it as a tensor" in said, said
    # the default config recorded: the clause about a setting that is not set is left out
    said, _, _, _ = suggestion("n == 2", DEFAULTS, None)
    assert "specialize_int" not in said and "makes it a symbol after one change" in said, said
    # a symbol the compile made: automatic dynamic did its work whatever the setting says
    said, _, _, _ = suggestion("n == 2", {**DEFAULTS, "automatic_dynamic_shapes": False},
                               {"L['n']"})
    assert "this compile makes it a symbol (automatic dynamic)" in said, said
