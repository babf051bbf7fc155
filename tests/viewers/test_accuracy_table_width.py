"""The eager check's table of outputs on an 80-column terminal (info piped, a narrow window):
a Hugging Face cache's long output names take the width, and before they pushed the numeric
columns to wrap: the header ``compiled↔fp64`` read ``compiled↔fp6`` over ``4`` (BART's
generate(), eight ``past_key_values.*_attention_cache.layers[i].keys`` outputs)."""

from __future__ import annotations

from rich.console import Console

from tuidebug.viewers.summary_view import accuracy_renderables

NAMES = [f"past_key_values.{side}_attention_cache.layers[{i}].{kv}"
         for side in ("self", "cross") for i in (0, 1) for kv in ("values", "keys")]


def test_numbers_and_headers_stay_on_one_line_at_80_columns() -> None:
    outs = [{"name": n, "dtype": "float32", "shape": [1, 4, 10, 16], "err_compiled": 2.07e-08,
             "err_eager": 2.07e-08, "rule": "allclose", "ok": True} for n in NAMES]
    check = {"close": True, "rule": "allclose", "reference": "float64", "detail": "within",
             "outputs": outs}
    console = Console(width=80, record=True, color_system=None)
    for r in accuracy_renderables("0/0", check):
        console.print(r)
    text = console.export_text()
    lines = text.splitlines()
    (header,) = [ln for ln in lines if ln.lstrip().startswith("out ")]
    assert "compiled↔fp64" in header and "eager↔fp64" in header, text
    rows = [ln for ln in lines if "allclose" in ln and "ok" in ln]
    assert len(rows) == len(NAMES), text  # one line with the numbers per output
    for ln in rows:
        assert "[1,4,10,16]" in ln and ln.count("2.07e-08") == 2, ln
    # every name is there, whole, once its folded lines are joined
    end = header.index("dtype")
    flat = "".join(ln[4:end].strip() for ln in lines[lines.index(header) + 1:])
    for n in NAMES:
        assert n in flat, (n, flat)
