"""``tuidebug flags demo NAME``: toggle one Inductor flag on a bundled example and show what
actually changed.

For each flag of the flags guide there is a :class:`Demo`: an example script, the flag's two
values (A, usually the default, and B), other settings both traces need (``base``), and the
evidence that should move. A demo traces the example with A in the recompile worker, recompiles
that trace with B (the same machinery as ``tuidebug recompile``), compares the two traces
(``tuidebug.trace.diff``) and measures each piece of evidence on both. Nothing is assumed: where
the installed torch shows no difference, the report says so and lists what was compared.

Everything here but :func:`run_demo`'s worker is torch-free.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tuidebug.trace.reader import Trace

__all__ = ["Demo", "DEMOS", "demo_for", "trace_metrics", "run_demo", "demo_main",
           "torch_build_has_cuda"]

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"

# evidence: metric key → label. Metrics are computed by trace_metrics().
METRIC_LABELS = {
    "status": "trace status",
    "error": "error",
    "kernels": "generated kernels (C++/Triton functions)",
    "scheduler_kernels": "scheduler kernels (IR nodes after fusion, no externs)",
    "extern_calls": "extern calls",
    "fx_nodes": "FX nodes (post-grad)",
    "ir_pre": "IR nodes before fusion",
    "ir_post": "IR nodes after fusion",
    "reductions": "reductions in the IR",
    "fused": "fusions made",
    "passes_changed": "passes that changed the graph",
    "post_grad_ops": "ops in the post-grad graph",
    "assert_size_stride": "assert_size_stride( in wrappers",
    "aten_fallbacks": "torch.ops.aten.* calls in wrappers",
    "fxgraph_cache_hit": "FX graph cache hits",
    "fxgraph_cache_miss": "FX graph cache misses",
    "autotuned_ops": "autotuned ops",
    "autotune_choices": "autotune choices benchmarked",
    "autotune_winners": "autotune winners",
    "autotune_reused": "autotuned ops whose timings repeat an earlier op's (cache served)",
    "matches_eager": "compiled output matches eager",
    "compile_s": "compile time (s, all frames)",
    "first_call_s": "first compiled call (s)",
    "code_sha": "generated code (hash of all kernels)",
    "cudagraphs": "CUDA graphs, per graph (meta.json: on / off / skipped: reason)",
}


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


# -- measuring a trace (torch-free) ---------------------------------------------------------------

def _autotune_metrics(t: Trace) -> dict[str, Any]:
    ops = [r for g in t.graphs for r in g.autotune]
    seen: dict[str, list[Any]] = {}
    reused = 0
    winners = []
    choices = 0
    for r in ops:
        key = json.dumps([r.get("op"), r.get("inputs")], sort_keys=True, default=str)
        times = [c.get("time_ms") for c in r.get("choices") or []]
        choices += len(times)
        if key in seen and seen[key] == times:
            reused += 1
        seen.setdefault(key, times)
        winners.append(_norm_name(str(r.get("winner"))))
    return {"autotuned_ops": len(ops), "autotune_choices": choices,
            "autotune_winners": ",".join(winners) or None, "autotune_reused": reused}


def _norm_name(n: str) -> str:
    return re.sub(r"_\d+$", "", n)


def trace_metrics(path: str | Path, greps: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """The evidence a demo compares, measured on one trace."""
    import hashlib

    from tuidebug.trace.diff.graphs import ir_counts
    from tuidebug.trace.diff.runs import counter_deltas

    t = Trace(path)
    m: dict[str, Any] = {"status": t.status}
    err = t.error
    m["error"] = f"{err.get('type')} ({err.get('phase')})" if isinstance(err, dict) else None
    kernels = extern = fx = pre = post = red = fused = sched = 0
    asserts = fallbacks = 0
    passes: list[str] = []
    ops: dict[str, int] = {}
    texts: list[str] = []
    code_hash = hashlib.sha256()
    for g in t.graphs:
        ks = g.kernels
        kernels += sum(1 for k in ks if k.get("kind") != "extern")
        extern += sum(1 for k in ks if k.get("kind") == "extern")
        snaps = [s for s in g.stages if s.file]
        fx += (snaps[-1].nodes or 0) if snaps else 0
        a, b = ir_counts(g.ir_pre), ir_counts(g.ir_post)
        pre += (a or {}).get("nodes", 0)
        post += (b or {}).get("nodes", 0)
        red += (b or {}).get("reductions", 0)
        sched += (b or {}).get("kernels", 0)
        fused += sum(1 for r in g.fusion if r.get("action") == "fused")
        passes += [s.name for s in g.stages if s.kind == "pass" and s.changed and s.file]
        final = g.final_graph()
        for n in final.compute_nodes() if final is not None else []:
            ops[n.short_target] = ops.get(n.short_target, 0) + 1
        wrapper = g.wrapper_code() or ""
        asserts += wrapper.count("assert_size_stride(")
        fallbacks += len(re.findall(r"torch\.ops\.aten\.\w+", _calls_only(wrapper)))
        texts.append(wrapper)
        for k in ks:
            if k.get("file"):
                src = g.code(str(k["file"])) or ""
                texts.append(src)
                code_hash.update(re.sub(rf"\b{re.escape(str(k['name']))}\b", "K", src).encode())
    m.update(kernels=kernels, extern_calls=extern, fx_nodes=fx, ir_pre=pre, ir_post=post,
             reductions=red, scheduler_kernels=sched, fused=fused,
             passes_changed=",".join(sorted(set(passes))) or None,
             post_grad_ops=" ".join(f"{k}×{v}" for k, v in sorted(ops.items())) or None,
             assert_size_stride=asserts, aten_fallbacks=fallbacks,
             code_sha=code_hash.hexdigest()[:12] if kernels else None)
    hits = misses = 0
    for deltas in counter_deltas(t).values():
        hits += deltas.get("fxgraph_cache_hit", 0)
        misses += deltas.get("fxgraph_cache_miss", 0)
    m.update(fxgraph_cache_hit=hits, fxgraph_cache_miss=misses)
    m.update(_autotune_metrics(t))
    checks = (t.runtime.get("checks") or {}) if isinstance(t.runtime, dict) else {}
    closes = [c.get("close") for c in checks.values() if isinstance(c.get("close"), bool)]
    m["matches_eager"] = all(closes) if closes else None
    firsts = [c.get("first_call_s") for c in checks.values() if isinstance(c.get("first_call_s"), (int, float))]
    m["first_call_s"] = round(sum(firsts), 4) if firsts else None
    times = [((c.get("metrics") or {}).get("entire_frame_compile_time_s")) for c in t.compiles.values()]
    times = [x for x in times if isinstance(x, (int, float))]
    m["compile_s"] = round(sum(times), 3) if times else None
    m["cudagraphs"] = _cudagraphs(t)
    all_text = "\n".join(texts)
    for label, pattern in greps:
        m[f"grep:{label}"] = len(re.findall(pattern, all_text))
    return m


def _cudagraphs(t: Trace) -> str | None:
    """Each graph's CUDA graphs state (``0_0-forward: on``), None where the trace has none."""
    from tuidebug.trace.summary import cudagraphs_state

    states = [(g.id, cudagraphs_state(g)) for g in t.graphs]
    return "; ".join(f"{gid}: {s}" for gid, s in states if s) or None


def output_metrics(lines: Any, greps: tuple[tuple[str, str], ...]) -> dict[str, int]:
    """``output:LABEL`` → matches of each regex in a job's output lines."""
    text = "\n".join(str(x) for x in lines or ())
    return {f"output:{label}": len(re.findall(pattern, text)) for label, pattern in greps}


def _calls_only(wrapper: str) -> str:
    from tuidebug.trace.diff.kernels import wrapper_calls

    return wrapper_calls(wrapper)


# -- running a demo -------------------------------------------------------------------------------

def torch_build_has_cuda() -> tuple[bool, str]:
    """Whether the installed torch was built with CUDA, read from ``torch/version.py`` (no
    torch import). Returns (has_cuda, torch version)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False, "not installed"
    path = Path(list(spec.submodule_search_locations)[0]) / "version.py"
    try:
        text = path.read_text()
    except OSError:
        return True, "?"  # cannot tell: let the worker check
    ver = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*(.+)$", text, re.M)
    has = bool(cuda) and cuda.group(1).strip() not in ("None", "''", '""')
    return has, ver.group(1) if ver else "?"


def _label(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def run_demo(name: str, out_dir: str | Path, *, worker: Any = None, timeout: float = 900.0,
             device: str | None = None,
             on_progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Trace the demo's example with value A, recompile it with value B, compare.

    Returns ``{"flag", "example", "a": SIDE, "b": SIDE, "evidence": [{"metric", "label", "a",
    "b", "changed", "primary"}], "observed": bool, "observed_lines": [...], "diff_lines": [...],
    "expect", "note", "skipped"}``; ``skipped`` is set (and nothing run) for a GPU-only flag
    where no CUDA GPU is available. ``device`` (``cpu``/``cuda``) is passed to the example as
    ``--device``; by default the examples use CUDA when it is available.
    """
    demo = demo_for(name)
    out_dir = Path(out_dir)
    result: dict[str, Any] = {"flag": demo.flag, "example": f"examples/{demo.example}",
                              "a_value": demo.a, "b_value": demo.b, "base": demo.base,
                              "expect": demo.expect, "note": demo.note, "skipped": None}
    if device == "cpu" and demo.gpu:
        result["skipped"] = f"{demo.flag} acts on Triton/CUDA code only; it has nothing to do on CPU"
        return result
    if demo.gpu:
        has_cuda, version = torch_build_has_cuda()
        if not has_cuda:
            result["skipped"] = (f"{demo.flag} acts on Triton/CUDA code only and needs a CUDA GPU; "
                                 f"this torch ({version}) is a CPU build")
            return result
    own = worker is None
    if own:
        from tuidebug.compiler.worker import RecompileWorker

        worker = RecompileWorker(warmup=False, timeout=timeout)
    try:
        if demo.gpu:
            worker.start()
            worker.wait_ready(600)
            if not worker.info.get("cuda"):
                result["skipped"] = (f"{demo.flag} acts on Triton/CUDA code only and needs a CUDA "
                                     f"GPU; torch {worker.info.get('torch')} sees none here")
                return result
        progress = (lambda job, msg: on_progress(f"{'A' if job.spec['kind'] == 'trace' else 'B'}: {msg}")
                    ) if on_progress else None
        safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", demo.flag)
        out_a = out_dir / f"{safe}={_label(demo.a)}".replace("/", "_")
        out_b = out_dir / f"{safe}={_label(demo.b)}".replace("/", "_")
        for p in (out_a, out_b):
            if p.exists():
                shutil.rmtree(p)
        args = list(demo.args) + (["--device", device] if device else [])
        result["device"] = device or "default (cuda if available)"
        job_a = worker.submit_script(EXAMPLES / demo.example, args,
                                     {**demo.base, demo.flag: demo.a}, out_a, cwd=str(EXAMPLES.parent),
                                     check=demo.check, timeout=timeout, on_progress=progress)
        job_a.wait()
        result["a"] = _side(job_a)
        if not (out_a / "manifest.json").exists():
            result["error"] = f"trace A could not be made: {job_a.state}: {job_a.error}"
            return result
        job_b = worker.submit(out_a, {demo.flag: demo.b}, out_b, timeout=timeout,
                              on_progress=progress)
        job_b.wait()
        result["b"] = _side(job_b)
        if not (out_b / "manifest.json").exists():
            result["error"] = f"trace B could not be made: {job_b.state}: {job_b.error}"
            return result
    finally:
        if own:
            worker.close()
    ma, mb = trace_metrics(out_a, demo.greps), trace_metrics(out_b, demo.greps)
    ma.update(output_metrics(job_a.output, demo.output_greps))
    mb.update(output_metrics(job_b.output, demo.output_greps))
    keys = list(dict.fromkeys(list(demo.evidence) + [f"grep:{label}" for label, _ in demo.greps]
                              + [f"output:{label}" for label, _ in demo.output_greps]))
    others = [k for k in METRIC_LABELS if k not in keys]
    evidence = []
    for k in keys + others:
        label = METRIC_LABELS.get(k) or k.split(":", 1)[1]
        evidence.append({"metric": k, "label": label, "a": ma.get(k), "b": mb.get(k),
                         "changed": ma.get(k) != mb.get(k), "primary": k in keys})
    primary_changed = [e for e in evidence if e["primary"] and e["changed"]
                       and e["metric"] not in ("compile_s", "first_call_s")]
    timing_only = [e for e in evidence if e["primary"] and e["changed"]
                   and e["metric"] in ("compile_s", "first_call_s")]
    from tuidebug.trace.diff import diff_traces

    d = diff_traces(out_a, out_b, code=False)
    result.update(evidence=evidence, observed=bool(primary_changed),
                  observed_lines=[f"{e['label']}: {_fmt(e['a'])} → {_fmt(e['b'])}"
                                  for e in primary_changed],
                  timing_lines=[f"{e['label']}: {_fmt(e['a'])} → {_fmt(e['b'])}" for e in timing_only],
                  diff_lines=d["lines"], traces={"a": str(out_a), "b": str(out_b)})
    return result


def _side(job: Any) -> dict[str, Any]:
    r = job.result or {}
    return {"trace": str(job.out), "state": job.state, "error": job.error,
            "elapsed_s": round(job.elapsed_s or 0, 2), "trace_status": r.get("trace_status")}


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


# -- CLI ------------------------------------------------------------------------------------------

def demo_main(name: str | None, *, out: str | None = None, as_json: bool = False,
              keep: bool = False, timeout: float = 900.0, device: str | None = None,
              console: Any = None) -> int:
    """``tuidebug flags demo [NAME]``. 0: ran (difference or not); 1: could not run here
    (GPU-only flag without a GPU, or a trace could not be made)."""
    import sys

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()
    if not name:
        has_cuda, version = torch_build_has_cuda()
        table = Table(title=f"flag demos (torch {version}{'' if has_cuda else ', CPU build'})",
                      title_justify="left")
        for col in ("flag", "example", "A → B", "needs"):
            table.add_column(col)
        for d in DEMOS.values():
            table.add_row(d.flag, d.example, f"{_label(d.a)} → {_label(d.b)}",
                          "CUDA GPU" if d.gpu else "")
        if as_json:
            console.out(json.dumps([{"flag": d.flag, "example": d.example, "a": d.a, "b": d.b,
                                     "gpu": d.gpu, "base": d.base} for d in DEMOS.values()],
                                   indent=1), highlight=False)
        else:
            console.print(table)
            console.print("run one: tuidebug flags demo NAME")
        return 0
    demo = demo_for(name)
    tmp = None
    if out:
        out_dir = Path(out)
    else:
        tmp = Path(tempfile.mkdtemp(prefix=f"tuidebug-demo-{demo.flag}-"))
        out_dir = tmp
    if not as_json:
        console.print(f"[bold]{demo.flag}[/]: {_label(demo.a)} → {_label(demo.b)} on "
                      f"examples/{demo.example}"
                      + (f" (both with {', '.join(f'{k}={_label(v)}' for k, v in demo.base.items())})"
                         if demo.base else ""))

    def progress(msg: str) -> None:
        if not as_json and (": phase" in msg or "compiling" in msg):
            print(f"[tuidebug] {msg}", file=sys.stderr, flush=True)

    try:
        res = run_demo(demo.flag, out_dir, timeout=timeout, device=device, on_progress=progress)
    finally:
        if tmp is not None and not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if tmp is not None and not keep:
        res["traces"] = None
    if as_json:
        console.out(json.dumps(res, indent=1, default=str), highlight=False)
        return 1 if res.get("skipped") or res.get("error") else 0
    if res.get("skipped"):
        console.print(Text(res["skipped"], style="yellow"))
        console.print(f"expected on a GPU: {demo.expect}")
        return 1
    if res.get("error"):
        console.print(Text(res["error"], style="red"))
        return 1
    for side in ("a", "b"):
        s = res[side]
        style = "green" if s["state"] == "ok" else "red"
        console.print(Text.assemble(f"{side.upper()}: ", (s["state"], style),
                                    f" in {s['elapsed_s']:.1f}s",
                                    f"  {s['error']}" if s.get("error") else ""))
    table = Table(title="evidence", title_justify="left")
    table.add_column("what")
    table.add_column(f"A ({_label(demo.a)})")
    table.add_column(f"B ({_label(demo.b)})")
    for e in res["evidence"]:
        if not e["primary"] and not e["changed"]:
            continue
        style = ("bold yellow" if e["changed"] else "dim") if e["primary"] else "dim"
        table.add_row(Text(e["label"] + ("" if e["primary"] else " (incidental)"), style=style),
                      _fmt(e["a"]), _fmt(e["b"]))
    console.print(table)
    console.print(f"expected: {demo.expect}")
    if res["observed"]:
        console.print(Text("observed: " + "; ".join(res["observed_lines"]), style="bold green"))
    else:
        compared = ", ".join(e["label"] for e in res["evidence"] if e["primary"])
        console.print(Text(f"no difference observed with this torch on this machine; compared: "
                           f"{compared}", style="bold yellow"))
    if res["timing_lines"]:
        console.print("timing: " + "; ".join(res["timing_lines"]))
    if demo.note:
        console.print(Text(demo.note, style="dim"))
    console.print(Text("comparison: " + " | ".join(res["diff_lines"][:8]), style="dim"))
    if res.get("traces"):
        console.print(f"traces: {res['traces']['a']}  {res['traces']['b']}  "
                      f"(tuidebug diff A B for everything)")
    return 0
