"""``trace --profile`` on the GPU (run on the GPU machine: ``pytest -m gpu``; skipped without
CUDA): a bf16 transformer training step, every Triton kernel measured on the device and on the
roofline against the device's peak; its backward too, compiled and eager, joined to the lines."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from tests.conftest import trace_example, trace_script
from tuidebug.trace.queries.profile import profile_view
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.roofline import roofline_rows
from tuidebug.trace.queries.summary import trace_summary
from tuidebug.viewers.info import render_summary

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda_profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu") / "profiled"
    proc = trace_example(out, "transformer_block.py", "--device", "cuda", "--dtype", "bfloat16",
                         "--layers", "2", "--dim", "256", "--seq", "128", "--batch", "8",
                         extra=["--profile", "20"])
    assert (out / "profile.json").is_file(), proc.stderr[-3000:]
    return out


def test_triton_kernels_measured_on_the_device(cuda_profiled: Path) -> None:
    t = Trace(cuda_profiled)
    assert t.problems == []
    (c,) = t.profile["compiles"].values()
    assert c["device"] == "cuda" and "cuda" in c["activities"]
    # read without resetting the user's peak statistics: null where the call stayed under
    # the process's peak so far, else above what was allocated when it began
    assert all(c[s]["peak_memory_bytes"] is None or c[s]["peak_memory_bytes"] > 0
               for s in ("compiled", "eager")), c
    triton = [k for k in c["kernels"] if k["kind"] == "triton"]
    assert triton and all(k["device_s"] and k["device_s"] > 0 for k in triton)
    assert all(k["bytes"] > 0 for k in triton)
    peak = c["device_peak"]
    assert peak["dram_gbps"] > 0 and peak["source"]
    # dense bf16 peaks: every CUDA GPU with bf16 tensor cores does tens of TFLOP/s or more
    # (Triton's estimate was 0.54 on an H100: a clock in the wrong unit)
    assert all(v >= 1.0 for v in peak.get("tflops", {}).values()), peak
    if "H100" in peak["name"] and peak["source"].startswith("Inductor"):
        assert 700 < peak["tflops"]["bfloat16"] < 1100, peak  # 989 dense (SXM datasheet)
    # eager nodes on a GPU are timed on the device, as the kernels are: a view launches nothing
    eager = c["eager_nodes"]
    assert any(n["device_s"] == 0 for n in eager)
    assert all(n["time_s"] == n["device_s"] for n in eager)
    names = {d["name"] for d in c["device_kernels"]}
    assert {k["kernel"] for k in triton} <= names  # Triton kernels keep the trace's names
    view = profile_view(t)
    assert view is not None and view.totals["extern_s"] > 0  # the matmuls (cuBLAS)
    rows = roofline_rows(view)
    assert rows and all(0 < r["gbps"] for r in rows)
    assert {r["bound"] for r in rows} <= {"memory", "compute", "launch"}


def test_info_prints_the_top_lines_and_the_roofline(cuda_profiled: Path) -> None:
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    render_summary(trace_summary(Trace(cuda_profiled)), console)
    text = console.export_text()
    print(text)  # the lead's closing note quotes it
    assert "runs on cuda" in text and "roofline (Triton kernels, per call)" in text


def test_the_backward_is_measured_on_the_device(cuda_profiled: Path) -> None:
    t = Trace(cuda_profiled)
    (c,) = t.profile["compiles"].values()
    assert "note" not in c, c.get("note")
    b = c["backward"]
    bwd = {g.id for g in t.graphs if g.kind == "backward"}
    assert set(b["graphs"]) == bwd and b["kernels"]
    assert all(k["graph"] in bwd and k["time_s"] and k["time_s"] > 0 for k in b["kernels"])
    triton = [k for k in b["kernels"] if k["kind"] == "triton"]
    assert triton and all(k["device_s"] and k["device_s"] > 0 for k in triton)
    assert all(k["bytes"] > 0 for k in triton)
    assert all(b[s]["peak_memory_bytes"] is None or b[s]["peak_memory_bytes"] > 0
               for s in ("compiled", "eager")), b
    assert 0 < b["compiled"]["wall_min_s"] <= b["compiled"]["wall_s"]
    # the eager backward per FX node: the backward functions on the device thread, matched to
    # the forward ops by sequence_nr and fwd_thread; timed on the device as the kernels are
    assert b["eager_nodes_from"] == "sequence_nr"
    eager = b["eager_nodes"]
    assert eager and all(n["time_s"] == n["device_s"] for n in eager)
    assert sum(n["device_s"] for n in eager) > 0
    view = profile_view(t)
    assert view is not None and view.totals["backward"]["compiled_wall_s"] > 0
    lines = [r for r in view.lines if r.phase == "bwd" and r.file
             and r.file.endswith("transformer_block.py")]
    assert lines and lines[0].compiled_s > 0 and any(r.eager_s for r in lines)
    assert any(r["phase"] == "bwd" for r in roofline_rows(view))


def test_the_whole_training_step_against_eager(cuda_profiled: Path) -> None:
    """The whole call through torch.compile, interleaved with eager: a verdict that follows its
    interval, and a ledger (forward graph, backward) adding up to the measured time."""
    from tuidebug.trace.queries.whole_call import call_verdicts

    (v,) = call_verdicts(Trace(cuda_profiled))
    assert v.device == "cuda" and v.training and v.rounds >= 20
    assert v.ratio_low <= v.ratio <= v.ratio_high
    expect = "faster" if v.ratio_low > 1 else "slower" if v.ratio_high < 1 else "same"
    assert v.outcome == expect, v.text
    assert abs(sum(p.seconds for p in v.ledger) - v.compiled.median_s) < 1e-8
    graphs = [p for p in v.ledger if p.part in ("graph", "cudagraph")]
    assert any(p.phase == "fwd" for p in graphs) and any(p.phase == "bwd" for p in graphs)
    # the backward as the autograd engine ran it: the compiled backward graph (marked on its
    # autograd node, events on the device's timeline) and the engine around it
    bwd = [p.part for p in v.ledger if p.phase == "bwd"]
    assert bwd == ["eager_island", "graph", "eager_island"], [p.as_json() for p in v.ledger]
    other = next(p.seconds for p in v.ledger if p.part == "other")
    assert abs(other) < 0.10 * v.compiled.median_s, [p.as_json() for p in v.ledger]
    # the timed calls ran bare, as the eager ones: no mark, hook or wrapper of the capture's
    (call,) = json.loads((cuda_profiled / "profile.json").read_text())["calls"]
    inst = call["instrumentation"]
    assert inst["timed"] == {"graph_marks": 0, "backward_hooks": 0, "wrapped_graph_calls": 0,
                             "watched_module_calls": 0}, inst
    clocked = inst["clocked"]
    assert clocked["backward_hooks"] > 0 and clocked["watched_module_calls"] > 0, inst


@pytest.mark.parametrize("layers", [4])
def test_graph_breaks_make_it_slower_on_the_gpu(tmp_path: Path, layers: int) -> None:
    from tuidebug.trace.queries.whole_call import call_verdicts

    out = tmp_path / "item"
    proc = trace_example(out, "item_per_layer.py", "--device", "cuda", "--layers", str(layers),
                         extra=["--profile", "10"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    (v,) = call_verdicts(Trace(out))
    assert v.outcome == "slower", v.text
    assert "`.item()` at item_per_layer.py:" in v.text, v.text
    assert len([p for p in v.ledger if p.part == "eager_island"]) == layers


REDUCE_OVERHEAD = '''import torch


def f(x):
    return torch.relu(x * 2 + 1).sum(dim=1)


cf = torch.compile(f, mode="reduce-overhead")
x = torch.ones(64, 256, device="cuda")
for _ in range(3):  # cudagraph trees record on a later call
    out = cf(x)
print("out", out.shape)
'''


def test_reduce_overhead_on_cuda_is_replayed_as_a_cuda_graph(tmp_path: Path) -> None:
    """The other side of the CPU test (tests/compiler/test_whole_call.py): on CUDA, a graph
    compiled under ``reduce-overhead`` is a CUDA graph in the ledger and the profile, and its
    kernels are not timed one by one (replayed without Python calls)."""
    from tuidebug.trace.queries.whole_call import call_verdicts

    out, _ = trace_script(tmp_path, "ro", REDUCE_OVERHEAD, "--profile", "3")
    (v,) = call_verdicts(Trace(out))
    assert "cudagraph" in [p.part for p in v.ledger], [p.as_json() for p in v.ledger]
    prof = json.loads((out / "profile.json").read_text())
    assert any(c.get("cudagraphs") for c in prof["compiles"].values()), prof["compiles"]
    (timings,) = list(out.glob("graphs/*/code/timings.json"))
    assert "under CUDA graphs" in json.loads(timings.read_text())["run"].get("note", "")


def test_a_profile_session_lets_cupti_go(monkeypatch: pytest.MonkeyPatch) -> None:
    """Capture's profiler sessions end with CUPTI let go (``TEARDOWN_CUPTI=1`` while the
    session stops; Kineto otherwise keeps it attached and every later kernel launch of the
    program pays: bench/after_profile.py measures it), then the variable is as it was; one the
    program set is left alone."""
    import os

    import torch

    from tuidebug.compiler.compat.profiling import profiled

    x = torch.randn(64, device="cuda")
    seen: list[str | None] = []

    def step() -> None:
        seen.append(os.environ.get("TEARDOWN_CUPTI"))
        (x * 2).sum().item()

    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    profiled(step, 2, ("step",))
    assert seen and set(seen) == {"1"}
    assert "TEARDOWN_CUPTI" not in os.environ
    seen.clear()
    monkeypatch.setenv("TEARDOWN_CUPTI", "0")  # the program's (or torch's, for CUDA graphs)
    profiled(step, 2, ("step",))
    assert seen and set(seen) == {"0"}
    assert os.environ["TEARDOWN_CUPTI"] == "0"


def test_the_restore_copy_is_not_a_device_kernel_of_the_run() -> None:
    """``before_run`` (the restore of an input the graph writes: a device-to-device copy, or a
    copy kernel where the dtype changes) runs in the profiler session, unclocked: its device
    kernels are not among the run's ``device_kernels`` (they were, once per run)."""
    import torch

    from tuidebug.compiler.compat.profiling import profiled

    x = torch.randn(1 << 16, device="cuda")
    cache, kept = torch.zeros(1 << 16, device="cuda"), torch.randn(1 << 16, device="cuda")
    kept_half = kept.half()

    def restore() -> None:
        cache.copy_(kept)  # Memcpy DtoD
        cache.copy_(kept_half)  # a copy kernel (half -> float)

    def run() -> None:
        with torch.profiler.record_function("tuidebug.k/run"):
            cache.mul_(x)

    runs = 4
    prof = profiled(run, runs, ("tuidebug.k/",), before_run=restore)
    kernels = prof["device_kernels"]
    assert len(kernels) == 1, kernels  # the mul's kernel alone
    (mul,) = kernels.values()
    assert mul["count"] == 1 and mul["device_us"] > 0
    assert prof["ranges"]["tuidebug.k/run"]["count"] == 1


CACHE_STEP = '''import torch

cache = torch.zeros(4, 8, device="cuda")
pos = torch.zeros(1, dtype=torch.long, device="cuda")
w = torch.randn(8, device="cuda", requires_grad=True)


@torch.compile
def step(x, w, cache, pos):
    y = (x * w).sin()
    cache.index_copy_(0, pos, x.view(1, 8))
    pos.add_(1)
    return y.sum() + cache.sum()


step(torch.randn(8, device="cuda"), w, cache, pos).backward()
print("POS", int(pos))
'''


def test_a_graph_that_writes_its_inputs_is_profiled_on_its_own_kernels(tmp_path: Path) -> None:
    """A training step that writes into its inputs, on CUDA: the forward's and the backward's
    device kernels are those of their own graphs (Triton kernels named in the trace), not the
    copies that put the inputs back before each run nor, for the backward, the forward run
    before each timed backward; the backward profiled from the inputs the call found (run
    from what the last run left, the position indexed the cache past its end)."""
    out, proc = trace_script(tmp_path, "cache_step", CACHE_STEP, "--profile", "3")
    assert "POS 1" in proc.stdout
    (c,) = json.loads((out / "profile.json").read_text())["compiles"].values()
    assert "note" not in c, c["note"]
    forward = {k["kernel"] for k in c["kernels"]}
    for side in (c, c["backward"]):
        assert "note" not in side, side["note"]
        own = {k["kernel"] for k in side["kernels"]}
        names = {d["name"] for d in side["device_kernels"]}
        assert own and names, side
        assert not [n for n in names if "memcpy" in n.lower()], names  # the restore's copy
        assert not names & (forward - own), (names, forward)
        if all(k["kind"] == "triton" for k in side["kernels"]):  # every launch is named
            assert names <= own, (side["device_kernels"], own)
        calls: dict[str, float] = {}
        for k in side["kernels"]:
            calls[k["kernel"]] = calls.get(k["kernel"], 0) + k["calls"]
        for d in side["device_kernels"]:  # as often per run as the graph calls it
            if d["name"] in own:
                assert d["calls"] == calls[d["name"]], (d, side["kernels"])
    # the whole call, timed on the device from where the user's call left its state, what it
    # writes put back before each run (before: the position ran past the cache's end)
    manifest = json.loads((out / "manifest.json").read_text())
    assert not any("whole call" in w for w in manifest["warnings"]), manifest["warnings"]
    (call,) = json.loads((out / "profile.json").read_text())["calls"]
    assert "not_measured" not in call, call["not_measured"]
    assert call["device"] == "cuda" and call["restored"] == ["argument 2", "argument 3"], call
    assert call["compiled"]["median_s"] > 0 and call["ledger"], call


def test_copies_over_half_the_free_device_memory_are_not_made() -> None:
    """The whole call's copies are compared with the device's free memory
    (``compat.free_device_bytes``, around ``torch.cuda.mem_get_info``): a tensor as large as
    60% of what is free is not copied (the copy would need more than half of what is left),
    a small one is, and a host tensor is not counted against the device."""
    import torch

    from tuidebug.compiler import compat
    from tuidebug.compiler.capture.copy_budget import over_budget

    torch.zeros(1, device="cuda")  # CUDA in use: the device the capture measures
    cuda = torch.device("cuda", torch.cuda.current_device())
    free = compat.free_device_bytes(cuda)
    assert free is not None and free > 2**30, free
    big = torch.empty(int(free * 0.6) // 4, dtype=torch.float32, device="cuda")
    said = over_budget([big], cuda)
    assert said is not None and "of device memory" in said and "free" in said, said
    assert over_budget([torch.ones(1024, device="cuda")], cuda) is None
    host = torch.empty(int(free * 0.6) // 4 // 64, dtype=torch.float32)
    assert over_budget([host], cuda) is None  # host tensors: not the device's budget
    del big
