"""One matmul under max-autotune (dtype and size from the command line): Inductor benchmarks the
extern mm against its Triton templates; choices that cannot run on this GPU fail and say why.

``--keep-oversized``: keep the Triton configs whose estimated shared memory exceeds the GPU's.
Newer Inductor prunes them before benchmarking (``_prune_exceeding_max_shared_mem_configs``), so
without this no choice fails and a test of recorded choice errors has nothing to see; with it a
config that needs more shared memory than any GPU has (128×128 tiles, BLOCK_K=256, fp32, 3
stages: ~786 KB) is compiled and fails deterministically. The compile, the failure and the
benchmark are all real: only the pruning step is turned off.
"""
import importlib
import sys

import torch

args = [a for a in sys.argv[1:] if not a.startswith("--")]
if "--keep-oversized" in sys.argv:
    for mod in ("torch._inductor.template_heuristics.triton", "torch._inductor.template_heuristics"):
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        for cls in list(vars(m).values()):
            if isinstance(cls, type) and "_get_exceeding_shared_memory_checker" in vars(cls):
                cls._get_exceeding_shared_memory_checker = lambda self, *a, **k: None
dtype = getattr(torch, args[0] if args else "float32")
n = int(args[1]) if len(args) > 1 else 512
a = torch.randn(n, n, device="cuda", dtype=dtype)
b = torch.randn(n, n, device="cuda", dtype=dtype)
f = torch.compile(lambda a, b: (a @ b).relu(), mode="max-autotune-no-cudagraphs")
print(f(a, b).shape)
