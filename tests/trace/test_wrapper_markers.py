"""The wrapper's markers that ``diff`` compares: calls of generated kernels counted by name."""

from __future__ import annotations

from tuidebug.trace.diff.kernels import _markers

WRAPPER = """\
def call(args):
    buf0 = empty_strided_cpu((4, ), (1, ), torch.float32)
    cpp_fused_add_1(buf0, arg0_1)
    cpp_fused_add_10(buf0)
        cpp_fused_add_1(buf0)

cpp_fused_add_1(buf1)
    x = cpp_fused_add_1(buf0)   # not at the start of its line
    cpp_fused_add_1 (buf0)      # a space before the parenthesis: not a call as written
    ns.kernel_2(buf0)
    ns.kernel_2(buf1)
    extern_kernels.addmm(a, b, c, out=buf2)
"""


def test_each_kernels_calls_at_the_start_of_a_line() -> None:
    # cpp_fused_add_1: three lines that start with its call (any indent); cpp_fused_add_10 is
    # another kernel; a name that is not a word (ns.kernel_2) is counted as well
    assert _markers(WRAPPER, ["cpp_fused_add_1"])["cpp_kernel_calls"] == 3
    assert _markers(WRAPPER, ["cpp_fused_add_10"])["cpp_kernel_calls"] == 1
    assert _markers(WRAPPER, ["ns.kernel_2"])["cpp_kernel_calls"] == 2
    assert _markers(WRAPPER, ["cpp_fused_add_1", "cpp_fused_add_10", "ns.kernel_2",
                              "cpp_fused_mul_0"])["cpp_kernel_calls"] == 6
    assert _markers(WRAPPER, [])["cpp_kernel_calls"] == 0
    assert _markers(WRAPPER, [])["extern_kernels"] == 1


def test_a_graph_one_side_only_has_is_not_counted_against_nothing(tmp_path) -> None:
    """``diff`` of two ranks of a job, rank 1 compiling once more: 'wrapper
    assert_size_stride: 0 → 97', 'extern_kernels: 0 → 78', though rank 0's graphs held the same
    asserts as rank 1's — only rank 1's extra graphs were counted, against nothing. Markers
    are compared over the graphs both have; the extra graph is named as such."""
    from tuidebug.trace.diff import diff_traces
    from tuidebug.trace.format import schema
    from tuidebug.trace.format.writer import TraceWriter

    code = ("def call(args):\n    assert_size_stride(arg0_1, (4, ), (1, ))\n"
            "    extern_kernels.mm(arg0_1, arg0_1, out=buf0)\n    return (buf0, )\n")
    for name, graphs in (("a", ["0_0-inference"]), ("b", ["0_0-inference", "0_1-inference"])):
        w = TraceWriter(tmp_path / name, command=["x.py"])
        for gid in graphs:
            cid = gid.split("-")[0].replace("_", "/")
            w.add_compile(cid, {"graphs": [gid]})
            w.add_graph(gid, kind="inference", compile_id=cid)
            g = w.graph(gid)
            index = g.write_output_code(code)
            g.write_meta(kind="inference", compile_id=cid, status="ok", stages=[],
                         phase_starts={}, kernels=len(index), fusion={})
            w.set_graph_status(gid, "ok")
        w.finish(schema.STATUS_OK)
    d = diff_traces(tmp_path / "a", tmp_path / "b")
    lines = "\n".join(d["lines"])
    assert "graphs only in A: none; only in B: 0_1-inference" in lines, lines
    assert not any(ln.startswith("wrapper ") for ln in d["lines"]), lines
    assert all(v["a"] == v["b"] for v in d["summary"]["wrapper_markers"].values()), \
        d["summary"]["wrapper_markers"]


def test_markers_over_the_graphs_both_have_say_what_they_left_out(tmp_path) -> None:
    """Markers count only the graphs both traces have; kernels, extern calls and FX nodes count
    every graph. With a graph on one side only, a marker that differs says the graphs it left
    out, and the line naming those graphs says which totals count them (one rule, said)."""
    from tuidebug.trace.diff import diff_traces
    from tuidebug.trace.format import schema
    from tuidebug.trace.format.writer import TraceWriter

    def code(asserts: int) -> str:
        return ("def call(args):\n" + "    assert_size_stride(arg0_1, (4, ), (1, ))\n" * asserts
                + "    extern_kernels.mm(arg0_1, arg0_1, out=buf0)\n    return (buf0, )\n")

    for name, graphs in (("a", {"0_0-inference": 1}),
                         ("b", {"0_0-inference": 2, "0_1-inference": 1})):
        w = TraceWriter(tmp_path / name, command=["x.py"])
        for gid, asserts in graphs.items():
            cid = gid.split("-")[0].replace("_", "/")
            w.add_compile(cid, {"graphs": [gid]})
            w.add_graph(gid, kind="inference", compile_id=cid)
            g = w.graph(gid)
            index = g.write_output_code(code(asserts))
            g.write_meta(kind="inference", compile_id=cid, status="ok", stages=[],
                         phase_starts={}, kernels=len(index), fusion={})
            w.set_graph_status(gid, "ok")
        w.finish(schema.STATUS_OK)
    lines = diff_traces(tmp_path / "a", tmp_path / "b")["lines"]
    (marker,) = [ln for ln in lines if ln.startswith("wrapper assert_size_stride")]
    assert marker == ("wrapper assert_size_stride: 1 → 2 (over the graphs both traces have: 1 "
                      "graph(s) only one has left out)"), lines
    (only,) = [ln for ln in lines if ln.startswith("graphs only in A")]
    assert only.endswith("(counted in the kernel, extern call, node and fusion totals; not in "
                         "the wrapper markers, compared over the graphs both have)"), only
