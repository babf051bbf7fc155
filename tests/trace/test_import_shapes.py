"""A compile's symbols read from a TORCH_TRACE log (``importers/shapes_log.py``): a log has no
ShapeEnv, so a symbol's range is the one it was created with, unless the log says more."""

from __future__ import annotations

from tuidebug.trace.importers.shapes_log import shapes_from_log


def test_a_symbol_the_log_specializes_reads_as_its_value() -> None:
    """Qwen2's first decode step (torch 2.13's log): ``create_symbol s16 = 6 [2, int_oo]`` for
    the attention mask's length, then ``symbolic_shape_specialization s16 = 6``. The import
    said ``2 <= s16`` beside "specialized: … = 6"; ``tuidebug trace`` of the same run says
    ``Eq(s16, 6)``."""
    src = "L['kwargs']['attention_mask'].size()[1]"
    shapes = shapes_from_log({"dynamic_shapes": [
        {"event": "create_symbol", "symbol": "s16", "val": "6", "vr": "[2, int_oo]",
         "source": src},
        {"event": "guard_added_fast", "expr": "s16 <= 6"},
        {"event": "symbolic_shape_specialization", "symbol": "s16", "sources": [src],
         "value": "6", "reason": "range_refined_to_singleton"}]})
    assert shapes is not None
    (sym,) = shapes["symbols"]
    assert sym["range"] == "Eq(s16, 6)" and sym["lower"] == sym["upper"] == 6, sym
    assert sym["created_range"] == "[2, int_oo]" and sym["replaced_by"] == "6"
    (sp,) = shapes["specializations"]
    assert sp["value"] == 6 and sp["guard"] == "s16 <= 6", sp
