"""What a capture adds to each call of a compiled callable, once it compiled and was checked.

In one process: a tiny function and a tiny module compiled before the capture starts (plain:
no hook of the capture's on their calls; the module is called through torch's own
``OptimizedModule.__call__``, taken before the capture wraps it class-wide, so the plain calls,
made while the capture runs, skip its watch as they would without it) and the same ones
compiled inside a capture with the eager check on (traced: the stand-in or the module watch,
and the capture's wrapper around the graph), each called ``--calls`` times per batch, plain and
traced batches alternating (the first of each round swapped every round). Reported per kind:
microseconds per call, plain and traced (median of the rounds, with the 10th-90th
percentiles), and the per-round ratio traced/plain with its median's interval; wall time and
this thread's CPU time, which holds on a loaded machine where the wall time does not. Each
traced side is also set against a plain one compiled with the graph-level caches the capture
turns off also off (torch wraps such a graph otherwise: about 2 µs a call of torch's own): what
remains is the capture's per-call work. ``module, bare``: the traced module called as the
whole call's timed calls call it (``session.bare``: torch's own ``__call__``, the capture's
wrapper around the graph passing straight through; here +0.9 to +1.6 µs a call of one graph,
load 2.9: about 3% of examples/item_per_layer.py's 16 graph calls on this CPU). (On a GPU the
capture's wrap of Triton's kernel launch is class-wide too: plain calls pass it, so the
figure there leaves that part out.)

    PYTHONPATH=. .venv/bin/python bench/compiled_call_overhead.py [--calls 10000] [--rounds 11] [--device cuda]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from tuidebug.compiler import compat  # noqa: E402
from tuidebug.compiler.capture import capture  # noqa: E402
from tuidebug.compiler.capture.compiled_calls import CompiledCalls  # noqa: E402
from tuidebug.machine import cores, load1  # noqa: E402
from tuidebug.trace.queries.verdict import ratio_interval, spread  # noqa: E402


def body(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) * 2 + 1


def copy_of(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` with a code object of its own: Dynamo keeps compiled code per code object, and
    each side must compile its own (the traced one inside the capture)."""
    return types.FunctionType(fn.__code__.replace(co_name=name), fn.__globals__, name)


def module_of(name: str) -> torch.nn.Module:
    def forward(self: Any, x: torch.Tensor) -> torch.Tensor:
        return body(x)
    return type(name, (torch.nn.Module,), {"forward": copy_of(forward, "forward")})()


def torchs_call(module: torch.nn.Module) -> Callable[..., Any]:
    """``module`` called through its class's ``__call__`` as it is now (before a capture
    wraps it for every instance: plain calls made during the capture then skip the wrap)."""
    return types.MethodType(type(module).__call__, module)


def batch(f: Callable[[torch.Tensor], Any], x: torch.Tensor, n: int) -> tuple[float, float]:
    """(wall, thread CPU) seconds per call of ``n`` calls of ``f(x)``."""
    w0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(n):
        f(x)
    if x.is_cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - w0) / n, (time.thread_time() - c0) / n


def measure(plain: Callable[..., Any], traced: Callable[..., Any], x: torch.Tensor,
            calls: int, rounds: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"pw": [], "pc": [], "tw": [], "tc": []}
    batch(plain, x, calls // 10)  # warm both
    batch(traced, x, calls // 10)
    for i in range(rounds):
        order = [("p", plain), ("t", traced)] if i % 2 == 0 else [("t", traced), ("p", plain)]
        for key, f in order:
            wall, cpu = batch(f, x, calls)
            out[key + "w"].append(wall)
            out[key + "c"].append(cpu)
    return out


def report(kind: str, m: dict[str, list[float]], against: str = "plain") -> None:
    print(f"{kind}, traced against {against}:")
    for clock, p, t in (("wall", m["pw"], m["tw"]), ("cpu", m["pc"], m["tc"])):
        sp, st = spread(p), spread(t)
        r = ratio_interval(t, p)
        print(f"  {clock:4}  plain {sp.median_s * 1e6:7.2f} µs "
              f"[{sp.p10_s * 1e6:.2f}-{sp.p90_s * 1e6:.2f}]  traced {st.median_s * 1e6:7.2f} µs "
              f"[{st.p10_s * 1e6:.2f}-{st.p90_s * 1e6:.2f}]  traced/plain {r.value:.3f} "
              f"[{r.low:.3f}-{r.high:.3f}]  (+{(st.median_s - sp.median_s) * 1e6:.2f} µs/call, "
              f"{r.n} rounds)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--device", default="cpu", help="where the tensors live (cuda: a GPU)")
    ns = ap.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(8, device=ns.device)
    # plain: as torch compiles them by default; "plain, caches off": with the graph-level
    # caches the capture turns off also off (torch then wraps each compiled graph differently):
    # what remains between it and traced is the capture's own per-call work
    fp, mp = torch.compile(copy_of(body, "plain")), torch.compile(module_of("Plain"))
    fp(x), mp(x)
    with compat.caches_off_patch():
        fq, mq = torch.compile(copy_of(body, "plain_nocache")), torch.compile(
            module_of("PlainNoCache"))
        fq(x), mq(x)
    mp_plain, mq_plain = torchs_call(mp), torchs_call(mq)  # before the capture's watch
    print(f"torch {torch.__version__}; load average {load1():.1f} on "
          f"{cores()} cores; {ns.calls} calls per batch, {ns.rounds} rounds")
    with tempfile.TemporaryDirectory() as tmp, capture(Path(tmp) / "trace") as session:
        ft, mt = torch.compile(copy_of(body, "traced")), torch.compile(module_of("Traced"))
        ft(x), mt(x)  # compiled and checked inside the capture
        assert len(session.graphs) >= 2, "the traced callables did not compile in the capture"
        report("function", measure(fp, ft, x, ns.calls, ns.rounds))
        report("function", measure(fq, ft, x, ns.calls, ns.rounds), "plain, caches off")
        assert type(mt).__call__ is not mp_plain.__func__, "the capture did not watch modules"
        report("module", measure(mp_plain, mt, x, ns.calls, ns.rounds))
        report("module", measure(mq_plain, mt, x, ns.calls, ns.rounds), "plain, caches off")
        # as the whole call's timed calls make them: bare (the capture's wrapper around the
        # graph passing straight through), through torch's own __call__
        with session.bare():
            mt_bare = session.concern(CompiledCalls).unwatched(mt)
            report("module, bare", measure(mp_plain, mt_bare, x, ns.calls, ns.rounds))
            report("module, bare", measure(mq_plain, mt_bare, x, ns.calls, ns.rounds),
                   "plain, caches off")
    print(f"load average {load1():.1f} at the end")


if __name__ == "__main__":
    main()
