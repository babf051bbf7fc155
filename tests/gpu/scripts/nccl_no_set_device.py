"""A 2-rank NCCL job whose ranks never call ``torch.cuda.set_device``: each puts its tensors on
``cuda:LOCAL_RANK`` and compiles a step issuing a functional all_reduce, called twice. Traced
with ``--profile``, the whole call's agreement between the ranks put its flags on
``torch.cuda.current_device()`` — device 0 on both ranks: NCCL refused two ranks on one device.
It prints each rank's result, as untraced."""

import os

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def main() -> None:
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))  # no set_device
    world = dist.group.WORLD

    @torch.compile
    def step(x):
        return funcol.all_reduce(torch.sin(x), "sum", world) * 2

    x = torch.ones(256, device=device)
    for _ in range(2):
        x = step(x)
    print(f"rank {rank}: nccl {x.sum().item():.4f}", flush=True)
    dist.barrier(device_ids=[device.index])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
