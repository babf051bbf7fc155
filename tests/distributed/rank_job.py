"""A tiny job for torchrun with gloo on the CPU (public APIs only), traced by the tests.

``python -m torch.distributed.run --nproc-per-node N rank_job.py MODE``; MODE:
  same   every rank compiles the same graph with the same inputs
  break  rank 1 breaks the graph (torch._dynamo.graph_break()) where the others do not
  shape  rank 1 calls the compiled function a second time with another input shape (a recompile)
  raise  rank 1 raises before compiling anything (torchrun then stops the other ranks)
  graph  rank 1 multiplies by another constant (the same compile ids, a different graph)
"""

import sys

import torch
import torch.distributed as dist


def main() -> None:
    mode = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    odd = rank == 1
    if mode == "raise" and odd:
        raise RuntimeError("rank 1 gives up")

    @torch.compile
    def f(x):
        y = torch.sin(x) * (3 if mode == "graph" and odd else 2)
        if mode == "break" and odd:
            torch._dynamo.graph_break()
        return torch.relu(y) + 1

    f(torch.randn(4))
    f(torch.randn(7 if (mode == "shape" and odd) else 4))
    t = torch.ones(1)
    dist.all_reduce(t)  # every rank reached the end
    assert t.item() == dist.get_world_size()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
