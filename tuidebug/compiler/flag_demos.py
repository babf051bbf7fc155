"""``tuidebug flags demo NAME``: toggle one Inductor flag on a bundled example and show what
actually changed.

For each flag of the flags guide there is a :class:`Demo`: an example script, the flag's two
values (A, usually the default, and B), other settings both traces need (``base``), and the
evidence that should move. A demo traces the example with A in the recompile worker, recompiles
that trace with B (the same machinery as ``tuidebug recompile``), compares the two traces
(``tuidebug.trace.diff``) and measures each piece of evidence on both. Nothing is assumed: where
the installed torch shows no difference, the report says so and lists what was compared.

This module is the catalogue (a :class:`Demo` per flag); ``demo_metrics`` measures the
evidence on a trace and ``demo_run`` runs a demo (``run_demo``, ``demo_main``). Everything but
``run_demo``'s worker is torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Demo", "DEMOS", "demo_for", "EXAMPLES"]

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"

@dataclass(frozen=True)
class Demo:
    flag: str
    example: str  # path under examples/
    a: Any  # value in trace A (usually the default)
    b: Any  # value in trace B
    evidence: tuple[str, ...]  # metric keys that should move
    expect: str  # what the flags guide says should change
    base: dict[str, Any] = field(default_factory=dict)  # settings both traces need
    args: tuple[str, ...] = ()
    gpu: bool = False  # acts on Triton / CUDA only
    check: bool = True  # compare against eager
    greps: tuple[tuple[str, str], ...] = ()  # (label, regex) counted in all kernels + wrappers
    output_greps: tuple[tuple[str, str], ...] = ()  # (label, regex) counted in the job's output
    note: str = ""  # how to read the result, limits on CPU


# what a remote-cache flag visibly does in OSS torch without a Redis server: one warning per try
_REMOTE_META = "'autotune_remote_cache': True in Triton kernels' inductor_meta"
_NO_REMOTE_CACHE = "'Unable to create cache' warnings in the compile's output (no remote backend)"

DEMOS: dict[str, Demo] = {d.flag: d for d in (
    Demo("fx_graph_cache", "flags/cache_twice.py", False, True,
         ("fxgraph_cache_hit", "fxgraph_cache_miss", "ir_post"),
         "with the FX graph cache on, the second compile of the same graph is a cache hit",
         note="The cache is on disk and survives between processes, so with it on even the first "
              "compile can hit (an earlier run compiled the same graph with the same config). A "
              "hit skips Inductor's passes, IR and codegen: trace B then has no IR for that graph."),
    Demo("force_disable_caches", "flags/cache_twice.py", False, True,
         ("fxgraph_cache_hit", "fxgraph_cache_miss", "ir_post"),
         "with caches force-disabled, hits stay at 0 and every compile does the full work",
         base={"fx_graph_cache": True},
         note="Both traces have fx_graph_cache=True; `tuidebug trace` itself turns the "
              "graph-level caches off unless --use-cache."),
    Demo("autotune_local_cache", "flags/frozen_linear.py", False, True,
         ("autotune_reused", "autotune_winners"),
         "with the local autotune cache on, timings of an op already benchmarked are looked up "
         "instead of measured again",
         base={"freezing": True, "max_autotune": True},
         note="The example compiles two models whose GEMMs have the same shapes. With the cache "
              "on, the second model's timings (autotune.jsonl) repeat the first's exactly: they "
              "come from the cache; with it off they are measured again (noisy, and the winner "
              "can flip). The cache is on disk: with it on, the first model can hit too."),
    Demo("autotune_remote_cache", "flags/pointwise.py", None, True,
         (f"output:{_NO_REMOTE_CACHE}", "code_sha", "kernels", "autotuned_ops"),
         "Triton autotuning results are also looked up in and stored to a remote cache",
         output_greps=((_NO_REMOTE_CACHE, r"Unable to create cache"),),
         greps=((_REMOTE_META, r"'autotune_remote_cache': True"),),
         note="In OSS torch the remote autotune cache is Redis (remote_cache.RemoteAutotuneCache): "
              "without the redis package and a server, creating it fails, Inductor logs 'Unable "
              "to create cache' and tunes as before. It is opened only when a Triton kernel is "
              "autotuned: on CPU it has nothing to act on, and the two traces come out the same. "
              "On a GPU the flag is written into each Triton kernel's inductor_meta (its code "
              "changes), and a kernel that is autotuned at run time tries to open the cache; a "
              "kernel with a single config (this pointwise one, on an H100 with torch 2.11) never "
              "does, so no warning is printed."),
    Demo("bundled_autotune_remote_cache", "flags/pointwise.py", None, True,
         (f"output:{_NO_REMOTE_CACHE}", "code_sha", "kernels"),
         "all autotuning results of a compiled graph are bundled into one remote cache entry",
         output_greps=((_NO_REMOTE_CACHE, r"Unable to create cache"),),
         note="Inductor opens the bundled cache once per compiled graph, when the graph's output "
              "code is loaded (AutotuneCacheBundler.begin_compile), on CPU too. In OSS torch it "
              "is Redis (remote_cache.RemoteBundledAutotuneCache): without the redis package and "
              "a server, creating it fails with 'redis not available', Inductor logs 'Unable to "
              "create cache' and compiles exactly as before (same kernels and code). It needs "
              "autotune_local_cache (on by default)."),
    Demo("joint_graph_constant_folding", "flags/constant_fold.py", True, False,
         ("passes_changed", "post_grad_ops", "code_sha"),
         "constant sub-expressions are folded in the joint graph (fewer ops after the joint "
         "graph passes)",
         note="Only uniform values are folded here (constant_fold_uniform_value: a chain that "
              "yields one value everywhere becomes a full()); the general constant folding runs "
              "with freezing. Lowering then propagates the same constants, so the kernels can "
              "come out identical: the difference is in the graphs."),
    Demo("max_fusion_size", "mlp.py", 64, 1,
         ("scheduler_kernels", "ir_post", "fused", "kernels"),
         "lowering max_fusion_size gives more, smaller kernels",
         note="On CPU the C++ backend packs every run of scheduler nodes between two extern "
              "calls into one C++ function, so the number of C++ functions rarely changes; the "
              "fusions, the IR after fusion and the loop nests inside the function do. On GPU "
              "each scheduler kernel is its own Triton kernel."),
    Demo("unroll_reductions_threshold", "flags/small_reduction.py", 8, 1,
         ("reductions", "ir_pre", "code_sha"),
         "a reduction over at most `threshold` elements is unrolled into pointwise code",
         greps=(("reduction accumulators (tmp_acc / tl.sum)", r"tmp_acc\d*\b|tl\.sum\("),)),
    Demo("pick_loop_orders", "flags/transposed.py", True, False,
         ("code_sha",),
         "the scheduler reorders loops by the strides of what a kernel reads and writes",
         greps=(("loops (for(...) / tl.arange)", r"\bfor\s*\(|tl\.arange\("),)),
    Demo("triton.autotune_at_compile_time", "flags/pointwise.py", False, True,
         ("code_sha", "compile_s", "first_call_s"),
         "Triton kernels are autotuned while compiling instead of at their first call",
         gpu=True, greps=(("compile-time auto-tuning block in wrappers",
                           r"Compile-time auto-tuning block"),)),
    Demo("max_autotune", "flags/frozen_linear.py", False, True,
         ("autotuned_ops", "extern_calls", "kernels", "code_sha"),
         "GEMMs are autotuned between backends (ATen, Triton or C++ templates)",
         base={"freezing": True},
         note="On CPU the C++ GEMM template (the CPP backend) needs constant weights, so both "
              "traces use freezing=True; without it max_autotune has no GEMM choice to make."),
    Demo("max_autotune_pointwise", "flags/pointwise.py", False, True,
         ("code_sha", "compile_s"),
         "pointwise Triton kernels are benchmarked over more block-size configs",
         gpu=True),
    Demo("max_autotune_gemm_backends", "flags/frozen_linear.py", "ATEN,TRITON,CPP", "ATEN",
         ("autotuned_ops", "extern_calls", "autotune_choices", "code_sha"),
         "the pool of GEMM backends autotuning chooses from",
         base={"freezing": True, "max_autotune": True},
         note="With only ATEN there is one choice per GEMM: nothing to benchmark, every GEMM is "
              "an extern call."),
    Demo("triton.use_block_ptr", "flags/pointwise.py", False, True,
         ("code_sha",),
         "Triton kernels load and store through block pointers (tl.make_block_ptr)",
         gpu=True, greps=(("tl.make_block_ptr", r"tl\.make_block_ptr"),)),
    Demo("triton.cudagraphs", "flags/pointwise.py", False, True,
         ("cudagraphs", "first_call_s", "compile_s"),
         "the compiled graph is recorded into a CUDA graph and replayed",
         gpu=True, greps=(("cudagraph mentions in wrappers", r"cudagraph"),),
         note="CUDA graphs are applied at run time, around the compiled module: the generated "
              "code does not change; each graph's CUDA graphs state (on, or skipped with "
              "Inductor's reason), the compile metrics (cudagraphify time) and call times do."),
    Demo("size_asserts", "mlp.py", True, False,
         ("assert_size_stride",),
         "the wrapper checks the size and stride of inputs and extern outputs "
         "(assert_size_stride)"),
    Demo("fallback_random", "flags/dropout.py", False, True,
         ("aten_fallbacks", "matches_eager", "kernels", "fx_nodes"),
         "random ops fall back to ATen (and match eager's random numbers)",
         greps=(("Inductor RNG in kernels (randint64/normalized_rand/seeds)",
                 r"randint64|normalized_rand|inductor_seeds|inductor_random"),)),
    Demo("implicit_fallbacks", "flags/grid_sample_3d.py", True, False,
         ("status", "error", "aten_fallbacks"),
         "an op with no lowering falls back to ATen; with it off the compile fails",
         note="Inductor registers the fallback the first time it sees the op and keeps it for "
              "the rest of the process: toggle this flag in a fresh process (the worker forks one "
              "per job)."),
)}


def demo_for(name: str) -> Demo:
    if name in DEMOS:
        return DEMOS[name]
    from tuidebug.compiler.flags import load_registry

    try:
        flag = load_registry().get(name)  # UnknownFlag with suggestions
    except LookupError:
        raise
    raise LookupError(f"no demo for {flag.name}; demos exist for: {', '.join(DEMOS)}")
