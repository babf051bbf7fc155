"""A tiny embedding model's training step under bf16 autocast on CUDA: the embedding's gradient
is zero-filled by one Triton kernel and accumulated into (index_put, atomic add) by a later one
— ``--numerics`` must judge that buffer after the later kernel, never blame the zero fill
(tests/gpu/test_cuda_numerics.py)."""

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(100, 32), torch.nn.Linear(32, 8)).cuda()
ids = torch.randint(0, 100, (4, 16), device="cuda")
step = torch.compile(model)
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = step(ids).float().pow(2).mean()
loss.backward()
print("loss", loss.item())
