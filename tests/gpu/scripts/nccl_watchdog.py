"""Two ranks on NCCL (one GPU each), a process group whose timeout is 10 s: rank 0 all-reduces,
rank 1 sleeps, so rank 0's collective runs past the timeout and the NCCL watchdog ends it (as
the installed torch does: a DistBackendError, or the process torn down). Run under
``tuidebug trace --nproc-per-node 2`` by tests/gpu/test_nccl_watchdog.py."""

import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl", timeout=timedelta(seconds=10), device_id=torch.device("cuda", rank))
t = torch.ones(1, device="cuda")
dist.all_reduce(t)  # both ranks: the communicator is up
torch.cuda.synchronize()
if rank == 1:
    time.sleep(300)
dist.all_reduce(t)  # WATCHDOG rank 0 waits here
torch.cuda.synchronize()
dist.destroy_process_group()
