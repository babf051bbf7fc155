"""One matmul under max-autotune (dtype and size from the command line): Inductor benchmarks the
extern mm against its Triton templates; choices that cannot run on this GPU fail and say why."""
import sys

import torch

dtype = getattr(torch, sys.argv[1] if len(sys.argv) > 1 else "float32")
n = int(sys.argv[2]) if len(sys.argv) > 2 else 512
a = torch.randn(n, n, device="cuda", dtype=dtype)
b = torch.randn(n, n, device="cuda", dtype=dtype)
f = torch.compile(lambda a, b: (a @ b).relu(), mode="max-autotune-no-cudagraphs")
print(f(a, b).shape)
