"""Splitting real Inductor output code into kernels (tuidebug.trace.format.kernels)."""

from __future__ import annotations

import re
from pathlib import Path

from tuidebug.trace.format.kernels import split_wrapper

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_dynamic_shape_wrapper_keeps_every_kernels_provenance() -> None:
    """A CUDA wrapper compiled with a symbolic sequence length (torch 2.11, H100, BERT from
    transformers) computes ``<kernel>_xnumel = 128*s27`` between a kernel's provenance comments
    and its ``.run(``; every kernel still gets its handles and source nodes."""
    code = (FIXTURES / "cuda_dynamic_wrapper" / "wrapper.py.txt").read_text()
    split = split_wrapper(code)
    assert re.search(r"^\s*\w+_xnumel = \d+\*s\d+$", code, re.M)  # the case this test is about
    assert len(split.kernels) >= 9
    for k in split.kernels:
        runs = len(re.findall(rf"^\s*{k.name}\.run\(", code, re.M))
        assert k.calls == runs, k.name
        assert len(k.handles) == runs, (k.name, k.handles)
        assert all(h.startswith(k.name + ":") for h in k.handles)
        assert k.source_nodes, k.name
    # every handle in the file's comments lands on a kernel or an extern call
    comment_handles = set(re.findall(r"\[Provenance debug handles\] (\S+)", code))
    found = {h for k in split.kernels for h in k.handles} | {h for e in split.externs
                                                             for h in e.handles}
    assert comment_handles == found
