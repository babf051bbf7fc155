"""A small data-parallel training job for bench/ranks.py (torchrun, gloo, CPU; public APIs).

A compiled 4-layer MLP, forward and backward, gradients all-reduced by hand each step (the
classic ``dist.all_reduce``), SGD. ``python -m torch.distributed.run --nproc-per-node N
_rank_train.py [STEPS]``.
"""

import sys

import torch
import torch.distributed as dist


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 512), torch.nn.LayerNorm(512),
                                torch.nn.Linear(512, 10))
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    world = dist.get_world_size()
    gen = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(steps):
        x = torch.randn(64, 256, generator=gen)
        y = torch.randint(0, 10, (64,), generator=gen)
        loss = torch.nn.functional.cross_entropy(compiled(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
