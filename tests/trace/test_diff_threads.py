"""Two ``--profile`` traces of the same script compiled for other thread counts (``--profile``
sets torch's threads to the cores free when the script starts: a tiny GPT-2 traced twice on a
busy 2-core machine compiled with 2 threads, then with 1): every C++ kernel's code differs
(``#pragma omp parallel`` or not), and ``diff`` read '9 changed' with nothing to say why. The
kernels line is followed by the threads each side had — only where a C++ kernel changed: a
Triton kernel's code does not depend on torch's CPU threads. Traces made with the torch-free
writer."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.diff import diff_traces
from tuidebug.trace.format import schema
from tuidebug.trace.format.writer import TraceWriter

WRAPPER = '''
cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*'], r\'\'\'
extern "C" void kernel(float* x) {{
{body}
}}
\'\'\')
def call(args):
    buf0 = empty_strided_cpu((4, ), (1, ), torch.float32)
    cpp_fused_relu_0(buf0)
    return (buf0, )
'''
PARALLEL = "    #pragma omp parallel\n    for (int i = 0; i < 4; i++) x[i] = 0;"
SERIAL = "    for (int i = 0; i < 4; i++) x[i] = 0;"


TRITON = '''
triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', \'\'\'
@triton.jit
def triton_poi_fused_relu_0(out_ptr0, xnumel, XBLOCK : tl.constexpr):
{body}
\'\'\', device_str='cuda')
def call(args):
    buf0 = empty_strided_cuda((4, ), (1, ), torch.float32)
    triton_poi_fused_relu_0.run(buf0, 4, stream=stream0)
    return (buf0, )
'''


def _trace(root: Path, body: str, threads: int, load: float, wrapper: str = WRAPPER) -> Path:
    w = TraceWriter(root, command=["gpt2_infer.py"])
    w.add_compile("0/0", {"graphs": ["0_0-inference"]})
    w.add_graph("0_0-inference", kind="inference", compile_id="0/0")
    g = w.graph("0_0-inference")
    index = g.write_output_code(wrapper.format(body=body))
    g.write_meta(kind="inference", compile_id="0/0", status="ok", stages=[], phase_starts={},
                 kernels=len(index), fusion={})
    w.set_graph_status("0_0-inference", "ok")
    w.write_profile({"compiles": {}, "machine": {"cores": 2, "load1": load, "threads": threads,
                                                 "user_threads": 2, "oversubscribed": load > 2}})
    w.finish(schema.STATUS_OK)
    return root


def test_kernels_compiled_for_other_thread_counts_say_so(tmp_path: Path) -> None:
    a = _trace(tmp_path / "a", PARALLEL, 2, 1.37)
    b = _trace(tmp_path / "b", SERIAL, 1, 2.95)
    lines = diff_traces(a, b)["lines"]
    i = next(i for i, ln in enumerate(lines) if ln.startswith("kernels:"))
    assert "1 changed" in lines[i], lines
    assert lines[i + 1].startswith("threads: A compiled and timed with 2, B with 1 — --profile "
                                   "sets torch's threads to the cores free when the script "
                                   "starts (load 1.37 → 2.95)"), lines
    assert "the 1 changed C++ kernel(s) may differ for that alone" in lines[i + 1], lines
    # the same thread count: nothing said of threads
    c = _trace(tmp_path / "c", SERIAL, 2, 0.5)
    assert not any(ln.startswith("threads:") for ln in diff_traces(a, c)["lines"])


def test_a_changed_triton_kernel_is_not_put_down_to_the_threads(tmp_path: Path) -> None:
    a = _trace(tmp_path / "a", "    xoffset = 0", 2, 1.37, TRITON)
    b = _trace(tmp_path / "b", "    xoffset = 1", 1, 2.95, TRITON)
    lines = diff_traces(a, b)["lines"]
    i = next(i for i, ln in enumerate(lines) if ln.startswith("kernels:"))
    assert "1 changed" in lines[i], lines
    assert not any(ln.startswith("threads:") for ln in lines), lines
