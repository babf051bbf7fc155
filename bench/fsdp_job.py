"""An FSDP2 (``fully_shard``) bf16 training step of a transformer, compiled, on every rank: for
``tuidebug trace --nproc-per-node N`` on GPUs (NCCL) or CPUs (gloo). Not a test: the lead runs
it on a multi-GPU machine (docs/distributed.md).

    tuidebug trace --nproc-per-node 2 --timeout 300 -o /tmp/fsdp-job bench/fsdp_job.py
    tuidebug trace --nproc-per-node 2 --timeout 300 -o /tmp/fsdp-odd bench/fsdp_job.py --odd

Dynamo traces FSDP2's hooks (``skip_fsdp_hooks=False``), so each compiled graph holds the
parameters' all-gathers (forward) and the gradients' reduce-scatters run by the hooks
(backward). ``--odd`` plants a rank-dependent recompile: on its second step rank 1 alone feeds
a longer sequence (a compile the other ranks do not have). ``--hooks-eager`` leaves FSDP2's
hooks to run eagerly (torch's default: its collectives then are outside the graphs).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from transformer_block import Transformer  # noqa: E402
from _dist import init_rank, train  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--odd", action="store_true", help="rank 1 recompiles at step 2")
    ap.add_argument("--hooks-eager", action="store_true", help="FSDP2 hooks not traced")
    a = ap.parse_args()
    cuda, rank, device = init_rank()
    if not a.hooks_eager:
        if hasattr(torch._dynamo.config, "skip_fsdp_hooks"):
            torch._dynamo.config.skip_fsdp_hooks = False
        elif rank == 0:
            print(f"torch {torch.__version__} has no skip_fsdp_hooks: FSDP2's hooks run as "
                  "this torch runs them", flush=True)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.manual_seed(0)
    dim = a.dim if cuda else min(a.dim, 64)
    seq = a.seq if cuda else min(a.seq, 16)
    model = Transformer(a.layers, dim, a.heads if cuda else 4).to(device)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    compiled = torch.compile(model)

    def batch(step: int) -> torch.Tensor:
        n = seq * 2 if (a.odd and rank == 1 and step == 1) else seq
        return torch.randn(a.batch, n, dim, device=device, dtype=torch.bfloat16)

    train(compiled, opt, a.steps, batch,
          lambda step, x: f"rank {rank} step {step} seq {x.shape[1]}", cuda)


if __name__ == "__main__":
    main()
