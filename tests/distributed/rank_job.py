"""A tiny job for torchrun with gloo on the CPU (public APIs only), traced by the tests.

``python -m torch.distributed.run --nproc-per-node N rank_job.py MODE``; MODE:
  same   every rank compiles the same graph with the same inputs (an all_reduce and an
         all_gather_into_tensor inside it)
  break  rank 1 breaks the graph (torch._dynamo.graph_break()) where the others do not
  shape  rank 1 calls the compiled function a second time with another input shape (a recompile)
  shapebreak  rank 1 calls the compiled function a second time with another shape (a recompile),
         and that compile alone breaks the graph at ``.item()``
  raise  rank 1 raises before compiling anything (torchrun then stops the other ranks)
  graph  rank 1 multiplies by another constant (the same compile ids, a different graph)
  collectives  rank 1 issues two all_reduces on two groups in the other order (gloo runs each
         group's work on its own thread: the job completes); then every rank compiles a DDP model
         that DDPOptimizer splits into 3 buckets, first called under ``no_sync`` (gradient
         accumulation), then in a step that all-reduces
  funcol every rank compiles one function issuing the c10d functional collectives
         (funcol.all_reduce, all_gather_tensor, reduce_scatter_tensor); ``funcol_odd``: rank 1's
         reduce_scatter_tensor reduces with "max" where the others use "sum" (the planted
         divergence: its third collective; gloo completes it, each rank reducing its own way)
  ddp    a compiled DistributedDataParallel of torch's own modules, trained 2 steps: Dynamo
         skips DDP's frames and no Inductor graph is compiled (the job succeeds untraced, and
         must traced); each rank prints its loss
  ddpexit  a DDP model (not compiled) trained 4 steps, the group ended while the model lives
         (the reducer holds its last reference when the model is freed), each rank printing its
         losses and a digest of its parameters
  chang  a compiled function issues a functional all_reduce each step; rank 1 stops calling it
         (sleeps) at the third step: rank 0 waits inside the compiled graph's collective
  ddphang  a (not compiled) DistributedDataParallel model in several buckets trains a step; at
         the second, rank 1 sleeps before its backward: rank 0 waits in a bucket all-reduce
         issued by DDP's C++ reducer
  ddpsafe  DDP models whose arithmetic the capture's logging hook must not change, each printed
         as a digest of its parameters: a builtin FP16_COMPRESS hook registered after
         construction (DDP's private ``_register_builtin_comm_hook``), 2 steps; then ``Join`` with
         ``divide_by_initial_world_size=False`` and uneven inputs (rank 0 3 steps, rank 1 one);
         then small models, 3 steps each: static_graph, find_unused_parameters with a parameter
         left unused, no_sync for the first step, gradient_as_bucket_view, bfloat16 parameters,
         two models trained by one loss, and (torch >= 2.13) batched_grad_copy, alone and with
         gradient_as_bucket_view; run on 3 ranks (a divisor that is not a power of two)
  budget every rank compiles one function issuing a functional all_reduce; rank 1 alone has no
         memory budget for the whole call's copies (``--profile``): every rank must skip the
         timed calls (whose all_reduces pair up), or rank 0 waits forever in them; then rank 0
         alone calls a compiled function issuing none (timed by rank 0 alone: no rank waits);
         then every rank calls ``flaky`` (an all_reduce, then eager code that raises on rank 1
         at its fourth call: in the whole call's timed rounds, never untraced): every rank must
         make its rounds and then agree, or rank 0 waits in rounds rank 1 left; then
         ``eager_sum``, whose all_reduce is eager after a graph break (no graph issues one) and
         which raises on rank 1 at its fourth call: the ranks must time it together all the same
  counted  every rank compiles one function issuing a functional all_reduce, calls it three
         times and prints each result (traced by the tests under a plain torchrun with ``--profile``, rank
         1's collective counter made to fail: every rank must go on untimed, none waiting)
  eagerone  as counted, rank 1's compile of the function making no graph (it all runs in a
         ``torch.compiler.disable``d function): traced with ``--profile``, rank 0 must not wait
         for rank 1's word, nor time a call rank 1 does not
  onerank  every rank compiles one function issuing a functional all_reduce and calls it 4
         times; at the third call rank 1 alone passes another float (a compile only it makes):
         traced with the eager check on (the default), whose re-run of that graph issued its
         all_reduce again on rank 1 alone
  hang   after compiling, rank 0 broadcasts then all-reduces, rank 1 the other way round: both
         wait forever (until ``--timeout`` ends the job)
  block  nothing compiled: rank 0 all-reduces, rank 1 sleeps (prints BLOCKED first): rank 0 waits
         in the all_reduce until the job is interrupted (Ctrl-C)
  ctimeout  nothing compiled: rank 0 all-reduces on a group whose timeout is 5 s, rank 1 sleeps:
         rank 0's collective times out (gloo's "Timed out waiting …"), torchrun stops rank 1
"""

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


class Net(torch.nn.Module):
    """Three 1 MiB layers: with a 1 MB bucket cap, DDPOptimizer splits the graph in three."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(512, 512) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def collectives(rank: int) -> None:
    first, second = dist.new_group([0, 1]), dist.new_group([0, 1])

    @torch.compile
    def g(x, y):
        if rank == 1:
            dist.all_reduce(y, group=second)  # rank 1 issues this one first
        dist.all_reduce(x, group=first)
        if rank != 1:
            dist.all_reduce(y, group=second)
        return x + y.sum()

    out = g(torch.ones(4), torch.ones(6))
    assert out.tolist() == [2.0 + 12.0] * 4, out
    torch.manual_seed(0)
    model = torch.compile(DistributedDataParallel(Net(), bucket_cap_mb=1))
    with model.no_sync():  # gradient accumulation: DDP's forward skips its logger, and its
        model(torch.randn(8, 512)).sum().backward()  # graph breaks at _rebuild_buckets
    model(torch.randn(8, 512)).sum().backward()


def functional(odd: bool) -> None:
    import torch.distributed._functional_collectives as funcol

    world = dist.group.WORLD

    @torch.compile
    def h(x):
        y = funcol.all_reduce(torch.sin(x), "sum", world)
        g = funcol.all_gather_tensor(y * 2, 0, world)
        r = funcol.reduce_scatter_tensor(g, "max" if odd else "sum", 0, world)
        return torch.relu(r) + g.sum()

    out = h(torch.ones(4, 3))
    assert out.shape == (4, 3), out


def budget(rank: int) -> None:
    import os

    import torch.distributed._functional_collectives as funcol

    if rank == 1:  # read by the capture where it decides to time the call: rank 1 alone skips
        os.environ["TUIDEBUG_TESTING_COPY_BUDGET"] = "0"
    world = dist.group.WORLD

    @torch.compile
    def step(x):
        return funcol.all_reduce(torch.sin(x), "sum", world) * 2

    out = step(torch.ones(4))
    print(f"rank {rank}: budget {out.sum().item():.4f}", flush=True)
    if rank == 0:  # a callable rank 0 alone calls, with no collective: timed by rank 0 alone

        @torch.compile
        def solo(x):
            return torch.cos(x) + 1

        print(f"rank 0: solo {solo(torch.ones(3)).sum().item():.4f}", flush=True)
    if rank == 1:  # the next callable within the budget: rank 1 times it with rank 0
        os.environ.pop("TUIDEBUG_TESTING_COPY_BUDGET")
    calls = [0]

    @torch.compiler.disable
    def tick():  # rank 1's fourth call raises: untraced, never (one call)
        calls[0] += 1
        if rank == 1 and calls[0] == 4:
            raise RuntimeError("rank 1 fails its fourth call")

    @torch.compile
    def flaky(x):
        y = funcol.all_reduce(torch.cos(x), "sum", world) + 1
        tick()  # after the collective: the ranks' collectives still pair up
        return y

    print(f"rank {rank}: flaky {flaky(torch.ones(4)).sum().item():.4f}", flush=True)
    eager_calls = [0]

    @torch.compiler.disable
    def reduce_eagerly(y):  # a graph break: the all_reduce runs eagerly, in no graph
        dist.all_reduce(y)  # eagerly: in no graph
        eager_calls[0] += 1
        if rank == 1 and eager_calls[0] == 4:  # in the timed rounds' warm-up: never untraced
            raise RuntimeError("rank 1 fails its fourth eager call")
        return y

    @torch.compile
    def eager_sum(x):  # no collective in a graph
        return reduce_eagerly(torch.sin(x) * 2) + 1

    print(f"rank {rank}: eager {eager_sum(torch.ones(4)).sum().item():.4f}", flush=True)


def counted(rank: int, eager_rank: int | None = None) -> None:
    import torch.distributed._functional_collectives as funcol

    @torch.compiler.disable
    def summed(y):  # eager: the graph before it issues no collective (profiled on one rank)
        return funcol.all_reduce(y, "sum", dist.group.WORLD) * 2

    @torch.compiler.disable
    def eager(x):
        return summed(torch.sin(x))

    @torch.compile
    def reduce(x):
        if rank == eager_rank:  # all of it in a disabled function: no graph on that rank
            return eager(x)
        if eager_rank is not None:  # the others: a graph (sin), then the same eager all_reduce
            return summed(torch.sin(x))
        return funcol.all_reduce(torch.sin(x), "sum", dist.group.WORLD) * 2

    for step in range(3):  # a loop: the rank goes on with its collectives after the first call
        out = reduce(torch.full((4,), float(step)))
        print(f"rank {rank}: counted {step} {out.sum().item():.4f}", flush=True)


def one_rank_recompiles(rank: int) -> None:
    import torch.distributed._functional_collectives as funcol

    @torch.compile
    def step(x, scale):
        return funcol.all_reduce(x * scale, "sum", dist.group.WORLD) + 1

    for s in range(4):  # rank 1 alone calls with another float at step 2: a compile of its own
        scale = 3.0 if rank == 1 and s == 2 else 2.0
        out = step(torch.full((4,), float(s + rank)), scale)
        print(f"rank {rank}: onerank {s} {out.sum().item():.4f}", flush=True)


def ddp(rank: int) -> None:
    torch.manual_seed(0)
    seq = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model = torch.compile(DistributedDataParallel(seq))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = model(torch.randn(4, 8)).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
    print(f"rank {rank}: loss {loss.item():.4f}", flush=True)
    dist.barrier()  # both ranks done before teardown: CI saw rank 1 abort in gloo's teardown


def ddp_exit(rank: int) -> None:
    """A DDP model (not compiled) trained 4 steps; the group ended while the model lives, at
    the end of the function, as scripts end theirs at the end of ``main()``: the reducer then
    holds the group's last reference, freed as this frame ends."""
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    torch.manual_seed(1 + rank)
    for step in range(4):
        loss = torch.nn.functional.mse_loss(model(torch.randn(8, 16)), torch.randn(8, 4))
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"rank {rank} step {step} loss {loss.item():.8f}", flush=True)
    dist.destroy_process_group()
    digest = sum(p.double().sum().item() for p in model.parameters())
    print(f"rank {rank} digest {digest:.12f}", flush=True)


def compiled_hang(rank: int) -> None:
    import time

    import torch.distributed._functional_collectives as funcol

    world = dist.group.WORLD

    @torch.compile
    def step(x):
        y = funcol.all_reduce(torch.sin(x), "sum", world)  # STALL the compiled all_reduce
        return y * 0.5

    x = torch.ones(4)
    for i in range(3):
        if rank == 1 and i == 2:
            time.sleep(3600)  # STALL rank 1
        x = step(x)


def ddp_hang(rank: int) -> None:
    import time

    torch.manual_seed(0)
    model = DistributedDataParallel(Net(), bucket_cap_mb=1)
    for i in range(2):
        loss = model(torch.randn(8, 512)).sum()
        if rank == 1 and i == 1:
            time.sleep(3600)  # STALL rank 1 before its second backward
        loss.backward()  # DDP BACKWARD


def ddp_safe(rank: int) -> None:
    import hashlib

    from torch.distributed.algorithms.join import Join

    def digest(model: torch.nn.Module) -> str:
        h = hashlib.sha256()
        for p in model.parameters():
            h.update(p.detach().numpy().tobytes())
        return h.hexdigest()[:16]

    def train(model: torch.nn.Module, steps: int) -> None:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(steps):
            model(torch.randn(8, 512, generator=g)).sum().backward()
            opt.step()
            opt.zero_grad()

    g = torch.Generator().manual_seed(rank)
    torch.manual_seed(0)
    fp16 = DistributedDataParallel(Net(), bucket_cap_mb=1)
    fp16._register_builtin_comm_hook(dist.BuiltinCommHookType.FP16_COMPRESS)
    train(fp16, 2)
    print(f"rank {rank}: fp16_compress {digest(fp16)}", flush=True)
    joined = DistributedDataParallel(Net(), bucket_cap_mb=1)
    with Join([joined], divide_by_initial_world_size=False):
        train(joined, 3 if rank == 0 else 1)
    print(f"rank {rank}: join {digest(joined)}", flush=True)

    class Two(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

        def forward(self, x):
            return self.a(x)  # b unused

    def small(name: str, model: torch.nn.Module, dtype: torch.dtype = torch.float32,
              sync_from: int = 0) -> None:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(3):
            x = torch.randn(4, 16, generator=g).to(dtype)
            if i < sync_from:
                with model.no_sync():
                    model(x).float().sum().backward()
                continue
            model(x).float().sum().backward()
            opt.step()
            opt.zero_grad()
        print(f"rank {rank}: {name} {digest(model.float())}", flush=True)

    lin = lambda: torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh(),  # noqa: E731
                                      torch.nn.Linear(16, 16))
    small("static_graph", DistributedDataParallel(lin(), static_graph=True))
    small("find_unused", DistributedDataParallel(Two(), find_unused_parameters=True))
    small("no_sync", DistributedDataParallel(lin()), sync_from=1)
    small("bucket_view", DistributedDataParallel(lin(), gradient_as_bucket_view=True))
    small("bf16", DistributedDataParallel(lin().to(torch.bfloat16)), dtype=torch.bfloat16)
    import inspect

    if "batched_grad_copy" in inspect.signature(DistributedDataParallel.__init__).parameters:
        small("batched", DistributedDataParallel(lin(), batched_grad_copy=True))
        small("batched_view", DistributedDataParallel(lin(), batched_grad_copy=True,
                                                      gradient_as_bucket_view=True))
    first, second = DistributedDataParallel(lin()), DistributedDataParallel(lin())
    opt = torch.optim.SGD([*first.parameters(), *second.parameters()], lr=0.1)
    for _ in range(3):
        x = torch.randn(4, 16, generator=g)
        (first(x).sum() + second(x).sum()).backward()
        opt.step()
        opt.zero_grad()
    print(f"rank {rank}: two_models {digest(first)} {digest(second)}", flush=True)
    dist.barrier()  # every rank's async work done before teardown (a gloo abort seen at 3 ranks)


def _teardown() -> None:
    """Free what holds the process group (DDP's reducer, its buckets' work, in reference cycles)
    while the interpreter is whole, then end the group: left to the interpreter's exit, gloo's
    teardown aborted a rank now and then ('terminate called without an active exception',
    SIGABRT, untraced, in CI; torch issue 190489 has the like)."""
    import gc

    gc.collect()
    dist.destroy_process_group()


def main() -> None:
    mode = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    odd = rank == 1
    if mode == "ctimeout":
        from datetime import timedelta

        group = dist.new_group(timeout=timedelta(seconds=5))
        if odd:
            import time

            time.sleep(600)
        dist.all_reduce(torch.ones(1), group=group)  # CTIMEOUT rank 0
        return  # never reached: rank 0's collective times out
    if mode == "block":
        if odd:
            print("BLOCKED", flush=True)
            import time

            time.sleep(3600)
        dist.all_reduce(torch.ones(1))  # BLOCK rank 0
        return  # never reached by rank 0 within the test
    if mode == "chang":
        compiled_hang(rank)
        return  # never reached: the job hangs
    if mode == "ddphang":
        ddp_hang(rank)
        return  # never reached: the job hangs
    if mode == "ddpsafe":
        ddp_safe(rank)
        _teardown()
        return
    if mode == "ddp":
        ddp(rank)
        _teardown()
        return
    if mode == "ddpexit":
        ddp_exit(rank)  # ends the group itself
        return
    if mode == "raise" and odd:
        raise RuntimeError("rank 1 gives up")

    if mode == "collectives":
        collectives(rank)
    if mode in ("counted", "eagerone"):
        counted(rank, 1 if mode == "eagerone" else None)
        _teardown()
        return
    if mode == "onerank":
        one_rank_recompiles(rank)
        _teardown()
        return
    if mode == "budget":
        budget(rank)
        _teardown()
        return
    if mode.startswith("funcol"):
        functional(mode == "funcol_odd" and odd)
        _teardown()
        return

    @torch.compile
    def f(x):
        y = torch.sin(x) * (3 if mode == "graph" and odd else 2)
        if mode == "break" and odd:
            torch._dynamo.graph_break()
        if mode == "shapebreak" and x.shape[0] == 7:
            y = y + y.sum().item()  # SHAPEBREAK only rank 1's recompile breaks here
        if mode == "same":
            dist.all_reduce(y)
            w = torch.empty(2 * y.numel(), dtype=y.dtype)
            dist.all_gather_into_tensor(w, y)
            y = y + w[:y.numel()]
        return torch.relu(y) + 1

    if mode != "collectives":
        f(torch.randn(4))
        f(torch.randn(7 if (mode in ("shape", "shapebreak") and odd) else 4))
    t = torch.ones(1)
    if mode == "hang":
        if rank == 0:
            dist.broadcast(t, 0)  # HANG rank 0
        dist.all_reduce(t)  # HANG rank 1
        dist.broadcast(t, 0)
    dist.all_reduce(t)  # every rank reached the end
    assert t.item() == dist.get_world_size()
    _teardown()


if __name__ == "__main__":
    main()
