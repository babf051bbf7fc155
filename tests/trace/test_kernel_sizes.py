"""Kernels specialized to their sizes vs kernels taking symbolic sizes (trace/kernel_sizes.py):
a real torch 2.11 CUDA wrapper compiled with a symbolic sequence length, and the shared
dynamic-shapes trace (the real compiler on this machine's CPU)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import pythonpath
from tuidebug.trace.queries.kernel_sizes import call_args, kernel_params, symbolic_sizes
from tuidebug.trace.format.kernels import split_wrapper

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_triton_kernels_of_a_dynamic_wrapper_name_their_symbols() -> None:
    code = (FIXTURES / "cuda_dynamic_wrapper" / "wrapper.py.txt").read_text()
    kernels = split_wrapper(code).kernels
    assert kernels
    for k in kernels:
        sizes = symbolic_sizes(k.source, k.kind, code, k.name)
        params = kernel_params(k.source, k.kind)
        ks = [p for p in params if re.fullmatch(r"ks\d+", p)]
        # every ks<N> parameter of the kernel is a symbolic size, with the wrapper's expression
        assert [s["param"] for s in sizes if s["param"].startswith("ks")] == ks, k.name
        for s in sizes:
            assert s["symbols"] and all(re.fullmatch(r"[su]\d+", x) for x in s["symbols"])
            assert "ptr" not in s["param"]
    # a numel the wrapper computed before the call is shown as its expression
    name = next(k.name for k in kernels if f"{k.name}_xnumel = " in code)
    assert f"{name}_xnumel" in call_args(code, name)
    numel = re.search(rf"^\s*{name}_xnumel = (.+)$", code, re.M).group(1).strip()
    k = next(k for k in kernels if k.name == name)
    assert {"param": "xnumel", "expr": numel,
            "symbols": sorted(set(re.findall(r"\bs\d+\b", numel)))} in \
        symbolic_sizes(k.source, k.kind, code, name)


def test_static_and_symbolic_kernels_of_a_capture(dynamic_trace: Path) -> None:
    env = dict(os.environ, PYTHONPATH=pythonpath())
    out = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", "--json",
                          str(dynamic_trace)], capture_output=True, text=True, env=env,
                         timeout=120)
    graphs = {g["compile_id"]: g for g in json.loads(out.stdout)["graphs"]}
    symbols = {cid: {s["name"] for s in c.get("symbols") or []}
               for cid, c in ((c["id"], c) for c in json.loads(out.stdout)["compiles"])}
    # the first compile is static: no kernel takes a size; the recompile is symbolic
    assert all(k["symbolic_sizes"] == [] for k in graphs["0/0"]["kernel_sizes"])
    (k,) = graphs["0/1"]["kernel_sizes"]
    assert k["symbolic_sizes"] and k["symbolic_sizes"][0]["param"] == "ks0"
    assert set(k["symbolic_sizes"][0]["symbols"]) <= symbols["0/1"]
    # its IR reads index the input over a loop whose range is that symbol (sympy's text)
    (sym,) = k["symbolic_sizes"][0]["symbols"]
    reads = [a for a in k["accesses"] if a["mode"] == "read"]
    assert any(sym in a["ranges"].values() and re.search(r"\d\*c\d", a["index"])
               for a in reads), k["accesses"]
    assert all(sym not in a["ranges"].values()
               for kk in graphs["0/0"]["kernel_sizes"] for a in kk["accesses"])
    # an unbacked size (.item()) reaches the kernel that slices by it
    took = [s for g in graphs.values() for kk in g["kernel_sizes"] for s in kk["symbolic_sizes"]
            if any(x.startswith("u") for x in s["symbols"])]
    assert took


async def test_the_code_screen_header_names_a_kernels_sizes(open_ui, dynamic_trace: Path) -> None:
    from tuidebug.tui.screens.code import CodeScreen

    async with open_ui(dynamic_trace) as ui:
        ui.app.set_graph("0_1-inference")
        await ui.press("4")
        screen = ui.app.screen
        assert isinstance(screen, CodeScreen)
        (kernel,) = [k.name for k in screen.graph.kernels]
        screen.goto_kernel(kernel)
        assert await ui.wait_for(lambda: "sizes: ks0 = s" in ui.text(), 10)
        ui.app.set_graph("0_0-inference")
        await ui.settle()
        screen.goto_kernel(kernel)
        assert await ui.wait_for(lambda: "sizes: specialized to its sizes" in ui.text(), 10)


def test_a_wrapper_of_2000_kernels_is_read_once_not_once_per_kernel() -> None:
    """``info`` reads every kernel's sizes: each kernel once searched the whole wrapper and
    re-read all its assignments (2,000 kernels: two minutes); now well under a second."""
    import time

    n = 2000
    wrapper = "def call(args):\n" + "".join(
        f"        buf{i} = empty_strided_cuda((s0, 64), (64, 1), torch.float32)\n"
        f"        triton_poi_fused_{i}_xnumel = {i + 1}*s0\n"
        f"        triton_poi_fused_{i}.run(arg0_1, buf{i}, ks0, triton_poi_fused_{i}_xnumel, "
        "stream=stream0)\n" for i in range(n))
    source = "def triton_poi_fused_0(in_ptr0, out_ptr0, ks0, xnumel, XBLOCK : tl.constexpr):\n"
    t0 = time.monotonic()
    sizes = [symbolic_sizes(source, "triton", wrapper, f"triton_poi_fused_{i}") for i in range(n)]
    assert time.monotonic() - t0 < 10
    for i in (0, 1234, n - 1):
        # ks0 is passed as ks0 (no symbol of the compile); xnumel as the wrapper computed it
        assert sizes[i] == [{"param": "xnumel", "expr": f"{i + 1}*s0", "symbols": ["s0"]}]


def test_a_kernel_whose_call_is_not_found_is_not_called_specialized() -> None:
    """Without the wrapper's call (an imported kernel, a C++ wrapper) a Triton kernel's xnumel
    may be a symbol: its size is unknown ("xnumel = ?"), not "specialized to its sizes" (a
    dynamic pointwise kernel over a contiguous input takes no ks<N>, only xnumel)."""
    from tuidebug.trace.queries.kernel_sizes import sizes_text

    code = (FIXTURES / "cuda_dynamic_wrapper" / "wrapper.py.txt").read_text()
    k = next(k for k in split_wrapper(code).kernels if f"{k.name}_xnumel = " in code)
    assert "xnumel" in kernel_params(k.source, k.kind)
    sizes = symbolic_sizes(k.source, k.kind, None, k.name)
    assert {"param": "xnumel", "expr": None, "symbols": []} in sizes
    assert "xnumel = ?" in sizes_text(sizes) and "specialized" not in sizes_text(sizes)
    cpp = "extern \"C\" void kernel(const float* in_ptr0, float* out_ptr0)\n{\n}\n"
    assert sizes_text(symbolic_sizes(cpp, "cpp", None, "cpp_fused_0")) == \
        "specialized to its sizes"  # C++: sizes are constants unless a ks<N> is passed
