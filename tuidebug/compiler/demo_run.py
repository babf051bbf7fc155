"""Running a flag demo (``tuidebug flags demo NAME``): trace the example with value A in the
recompile worker, recompile that trace with B, compare the two traces and measure the evidence
(``demo_metrics``); ``demo_main`` is the command. Torch-free but for the worker.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from tuidebug.compiler.demo_metrics import METRIC_LABELS, output_metrics, trace_metrics
from tuidebug.compiler.flag_demos import DEMOS, EXAMPLES, demo_for
from tuidebug.trace.format import schema

__all__ = ["run_demo", "demo_main", "torch_build_has_cuda"]

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
        progress = (lambda job, msg: on_progress(f"{'A' if job.spec.kind == 'trace' else 'B'}: {msg}")
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
        if not (out_a / schema.MANIFEST).exists():
            result["error"] = f"trace A could not be made: {job_a.state}: {job_a.error}"
            return result
        job_b = worker.submit(out_a, {demo.flag: demo.b}, out_b, timeout=timeout,
                              on_progress=progress)
        job_b.wait()
        result["b"] = _side(job_b)
        if not (out_b / schema.MANIFEST).exists():
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
                  # one measurement per side, in two processes: shown, never judged
                  timing_lines=[f"{e['label']}: {_fmt(e['a'])} → {_fmt(e['b'])} (one run each, "
                                "in two processes: not a measured difference)"
                                for e in timing_only],
                  diff_lines=d["lines"], traces={"a": str(out_a), "b": str(out_b)})
    return result


def _side(job: Any) -> dict[str, Any]:
    return {"trace": str(job.out), "state": job.state, "error": job.error,
            "elapsed_s": round(job.elapsed_s or 0, 2),
            "trace_status": job.result.trace_status if job.result is not None else None}


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
