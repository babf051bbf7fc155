"""Two compiles under mode="reduce-overhead" that Inductor cannot run as CUDA graphs: one mutates
an input, one has an input on the CPU. Inductor says why it skips CUDA graphs; the trace must too.
"""
import torch


def mutates(x, y):
    x.add_(1)
    return (x * y).sin()


def mixed(a, b):
    return a.sin() * 2, b.cos() + 1


x, y = torch.randn(64, device="cuda"), torch.randn(64, device="cuda")
m = torch.compile(mutates, mode="reduce-overhead")
for _ in range(3):
    m(x, y)
c = torch.compile(mixed, mode="reduce-overhead")
for _ in range(3):
    c(torch.randn(64, device="cuda"), torch.randn(64))
torch.cuda.synchronize()
print("ok")
