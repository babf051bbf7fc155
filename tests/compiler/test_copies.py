"""A copy keeping a view's strides allocates the whole span between its first and last element:
one costing far more than the view is not made, and the budget counts what a copy allocates.
Plain torch and FX, no compile."""

from __future__ import annotations

import pytest
import torch
from torch import fx

from tuidebug.compiler import accuracy
from tuidebug.compiler.capture.copy_budget import BUDGET_ENV, over_budget
from tuidebug.compiler.copies import WideCopy, copy_bytes, span_elements, strided_copy

CPU = torch.device("cpu")


def test_a_view_whose_strided_copy_spans_far_more_is_not_copied() -> None:
    last = torch.zeros(8, 1024, 256)[:, -1, :]  # 8 KiB as a view, 7.3 MiB as a strided copy
    assert span_elements(last) == 1 + 7 * 1024 * 256 + 255
    assert copy_bytes(last) == 4 * span_elements(last) > 800 * last.nbytes
    with pytest.raises(WideCopy, match=r"would take 7\.0 MiB for its 8\.0 KiB"):
        strided_copy(last)
    half = torch.zeros(8, 128).chunk(2, -1)[0]  # gaps costing little: strides kept
    copy = strided_copy(half)
    assert copy.stride() == (128, 1) and torch.equal(copy, half)
    assert copy_bytes(torch.zeros(4, 4).expand(3, 4, 4)) == 3 * 16 * 4  # cloned: its numel


def test_the_budget_counts_what_a_strided_copy_allocates(monkeypatch) -> None:
    gappy = torch.zeros(64, 1024)[:, :4]  # 1 KiB as a view, 252 KiB as its strided copy
    monkeypatch.setenv(BUDGET_ENV, str(100 * 1024))
    said = over_budget([gappy], CPU)
    assert said is not None and "over the budget" in said, said
    monkeypatch.delenv(BUDGET_ENV)
    said = over_budget([torch.zeros(8, 1024, 256)[:, -1, :]], CPU)
    assert said is not None and "would take 7.0 MiB" in said, said


def test_the_check_does_not_copy_a_wide_view_and_says_why() -> None:
    g = fx.Graph()
    g.output(g.call_method("mul", (g.placeholder("x"), 2.0)))
    gm = fx.GraphModule(torch.nn.Module(), g)
    records: list[dict] = []
    x = torch.ones(8, 1024, 256)[:, -1, :]
    out = accuracy.checked(gm, gm, records.append)(x)
    assert torch.equal(out, x * 2)  # the user's call ran as it asked
    (r,) = records
    assert r["skipped"].startswith("not compared: a copy keeping the strides of a (8, 256) "
                                   "view"), r
