"""Which file a shortened user-line path names (capture/source_context._resolve): torch 2.11's
guard comments cut a path mid-name; a bare or ambiguous tail names no file."""

from __future__ import annotations

from tuidebug.compiler.capture.source_context import _resolve

KNOWN = {"/work/main/examples/dynamic_shapes.py", "/home/u/data.py", "/srv/b/data.py"}


def test_a_path_cut_mid_name_is_the_one_known_file_it_ends() -> None:
    assert _resolve("ork/main/examples/dynamic_shapes.py", KNOWN) == \
        "/work/main/examples/dynamic_shapes.py"
    assert _resolve("main/examples/dynamic_shapes.py", KNOWN) == \
        "/work/main/examples/dynamic_shapes.py"  # cut at a folder


def test_a_bare_or_ambiguous_tail_names_no_file() -> None:
    assert _resolve("a.py", KNOWN) is None  # not "…/data.py"
    assert _resolve("ta.py", KNOWN) is None
    assert _resolve("b/data.py", {"/home/ub/data.py", "/srv/b/data.py"}) == "/srv/b/data.py"
    assert _resolve("/data.py"[1:], KNOWN) is None
