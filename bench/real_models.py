"""Trace real models from ``transformers`` and ``timm`` (random weights from configs, nothing
downloaded) and print, per model and mode: status, graphs, kernels, provenance coverage (the
generated kernels that name a source line), capture/plain compile-time ratio and wall time.

Each model runs twice in fresh processes with fresh, empty Inductor cache directories: plain,
then under capture (bench/_run_example.py times both the same way; the workloads are in
bench/_real_model.py). Models whose library is missing are skipped with the reason.

    .venv/bin/python bench/real_models.py                                   # CPU, tiny, default mode
    .venv/bin/python bench/real_models.py --modes default max-autotune --device cuda --dtype bfloat16
    .venv/bin/python bench/real_models.py --overhead --device cuda --dtype bfloat16 --modes max-autotune
        # capture overhead: a 4-layer decoder LM training step of realistic width (hidden 1024)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _real_model import MODELS, NEEDS  # noqa: E402

from tuidebug.trace.format.reader import Trace  # noqa: E402

HARNESS = ROOT / "bench" / "_run_example.py"
WORKLOAD = ROOT / "bench" / "_real_model.py"


def missing(name: str) -> str | None:
    """Why model ``name`` cannot run here (its library is not installed), or None."""
    lib = NEEDS[name]
    if importlib.util.find_spec(lib) is None:
        return (f"{lib} is not installed (" + ("pip install -e '.[bench]'" if lib == "transformers"
                else "pip install timm, with the torchvision build of your torch") + ")")
    if lib == "timm" and importlib.util.find_spec("torchvision") is None:
        return "timm needs torchvision, which is not installed (the build of your torch)"
    return None


def _run(mode: str, env: dict[str, str], tmp: Path) -> tuple[float, str]:
    env = dict(env, TORCHINDUCTOR_CACHE_DIR=str(tmp / f"cache-{mode}"), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(HARNESS), mode, str(WORKLOAD), str(tmp / "trace")],
                          env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        return float("nan"), (proc.stderr.strip().splitlines() or ["?"])[-1][:200]
    return json.loads(proc.stdout.strip().splitlines()[-1])["seconds"], ""


def trace_stats(trace: Path) -> dict[str, Any]:
    """status, graphs, generated kernels, those with a source line, and the eager verdicts."""
    t = Trace(trace)
    kernels = with_source = 0
    for g in t.graphs:
        prov = g.provenance.get("kernels") or {}
        for k in g.kernels:
            if k.kind == "extern":
                continue
            kernels += 1
            with_source += bool((prov.get(k.name) or {}).get("source"))
    checks = t.runtime.get("checks") or {}
    verdicts = {"match": sum(c.get("close") is True for c in checks.values()),
                "mismatch": sum(c.get("close") is False for c in checks.values()),
                "not compared": sum("skipped" in c for c in checks.values())}
    error = t.error  # an ErrorRecord
    return {"status": t.status, "graphs": len(t.graphs), "kernels": kernels,
            "with_source": with_source, "checks": verdicts,
            "error": f"{error.type}: {str(error.message)[:160]}" if error else ""}


def run_model(name: str, mode: str, device: str, dtype: str, repeat: int = 1,
              extra_env: dict[str, str] | None = None, keep: Path | None = None) -> dict[str, Any]:
    """One row: plain and captured runs of model ``name`` (median of ``repeat`` each)."""
    row: dict[str, Any] = {"model": name, "mode": mode, "device": device, "dtype": dtype}
    why = missing(name)
    if why:
        return {**row, "status": "skipped", "note": why}
    env = dict(os.environ, REAL_MODEL=name, REAL_MODE=mode, REAL_DEVICE=device, REAL_DTYPE=dtype,
               **(extra_env or {}))
    plain, traced = [], []
    t0 = time.perf_counter()
    for i in range(repeat):
        with tempfile.TemporaryDirectory(prefix="real-models-") as tmp:
            p, err = _run("plain", env, Path(tmp))
            if err:
                return {**row, "status": "plain run failed", "note": err}
            c, err = _run("capture", env, Path(tmp))
            plain.append(p)
            traced.append(c)
            if i == repeat - 1:
                if not (Path(tmp) / "trace" / "manifest.json").exists():
                    return {**row, "status": "no trace", "note": err}
                row.update(trace_stats(Path(tmp) / "trace"))
                if err:
                    row["note"] = err
                if keep is not None:
                    import shutil

                    shutil.copytree(Path(tmp) / "trace", keep / f"{name}-{mode}")
    p, c = statistics.median(plain), statistics.median(traced)
    row.update(plain_s=p, capture_s=c, ratio=c / p, wall_s=time.perf_counter() - t0)
    return row


def _print_header() -> None:
    print(f"{'model':13} {'mode':13} {'status':8} {'graphs':>6} {'kernels':>7} {'→src':>6} "
          f"{'eager check':>18} {'plain s':>8} {'trace s':>8} {'ratio':>6} {'wall s':>7}")


def _print_row(r: dict[str, Any]) -> None:
    if "kernels" not in r:
        print(f"{r['model']:13} {r['mode']:13} {r['status']}: {r.get('note', '')}", flush=True)
        return
    cov = f"{100 * r['with_source'] / r['kernels']:.0f}%" if r["kernels"] else "—"
    ch = r["checks"]
    checks = f"{ch['match']}✓ {ch['mismatch']}✗ {ch['not compared']}·"
    print(f"{r['model']:13} {r['mode']:13} {r['status']:8} {r['graphs']:6} {r['kernels']:7} "
          f"{cov:>6} {checks:>18} {r['plain_s']:8.1f} {r['capture_s']:8.1f} {r['ratio']:6.2f} "
          f"{r['wall_s']:7.0f}", flush=True)
    for text in (r.get("error"), r.get("note")):
        if text:
            print(f"{'':13} {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--modes", nargs="*", default=["default"],
                    choices=["default", "max-autotune", "max-autotune-no-cudagraphs",
                             "reduce-overhead"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default=None, help="float32 on the CPU, bfloat16 on cuda")
    ap.add_argument("--repeat", type=int, default=1, help="runs per side; the median is shown")
    ap.add_argument("--overhead", action="store_true",
                    help="only the capture-overhead measurement: llama_train with 4 layers of "
                         "hidden size 1024 (sequence 256, batch 4), --repeat 2 by default")
    ap.add_argument("--keep", type=Path, help="keep the traces in this directory")
    ap.add_argument("--json", type=Path, help="also write the rows here as JSON")
    ns = ap.parse_args(argv)
    dtype = ns.dtype or ("bfloat16" if ns.device.startswith("cuda") else "float32")
    models, extra, repeat = ns.models, None, ns.repeat
    if ns.overhead:
        models, extra = ["llama_train"], {"REAL_WIDE": "1", "REAL_LAYERS": "4"}
        repeat = max(ns.repeat, 2)
    if ns.keep:
        ns.keep.mkdir(parents=True, exist_ok=True)
    _print_header()
    rows = []
    for mode in ns.modes:
        for name in models:
            rows.append(run_model(name, mode, ns.device, dtype, repeat, extra, ns.keep))
            _print_row(rows[-1])
    if ns.json:
        ns.json.write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if r.get("status") not in ("ok", "skipped")
           or (r.get("kernels") and r["with_source"] < r["kernels"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
