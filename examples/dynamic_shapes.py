"""Dynamic shapes and recompiles: each function shows one way a size becomes a symbol, a guard
or a constant, and why torch.compile compiles again.

    tuidebug trace examples/dynamic_shapes.py
    tuidebug info TRACE            # symbols, specializations and each recompile explained
"""
import torch

torch._dynamo.config.capture_scalar_outputs = True  # .item() becomes an unbacked symbol
torch._dynamo.config.recompile_limit = 2            # per function: the third compile is refused


@torch.compile
def scale(x):  # batch 2, then 3: compiled again with a dynamic batch (automatic dynamic)
    return (x * 2).sum(0)


@torch.compile
def pick(x):  # the batch is marked dynamic, but this branch makes it a constant
    if x.shape[0] == 8:
        return x + 1
    return x - 1


@torch.compile
def take(x):  # an .item() of an intermediate is an unbacked symbol: unknown at compile time
    k = (x[:, 0] > 0).sum().item()
    torch._check(k >= 0)
    torch._check(k <= x.shape[0])
    return x[:k] * 3


@torch.compile(dynamic=False)
def limited(x):  # every new batch compiles again, until the recompile limit is hit
    return x.relu() + 1


def main():
    for b in (2, 3, 4):
        scale(torch.randn(b, 4))
    x = torch.randn(8, 4)
    torch._dynamo.mark_dynamic(x, 0)
    try:
        pick(x)
    except Exception as e:  # torch refuses: the dimension marked dynamic was specialized
        print(f"pick: {type(e).__name__}")
    take(torch.randn(6, 4))
    for b in (2, 3, 4):
        limited(torch.randn(b, 4))
    print("dynamic_shapes: done")


if __name__ == "__main__":
    main()
