"""Five common graph breaks in one function: print, .item(), a data-dependent if, .tolist(),
sorted(tensor).

    tuidebug trace examples/five_breaks.py
"""
import torch


def step(x):
    y = x.sin()
    print("y is ready")
    s = y.sum().item()
    z = y * s
    if z.sum() > 0:
        z = z + 1
    vals = z[:2].tolist()
    w = z * vals[0]
    order = sorted(w[:3])
    return w + order[0]


def main():
    fn = torch.compile(step)
    out = fn(torch.randn(8))
    print(f"five_breaks: out {tuple(out.shape)}")


if __name__ == "__main__":
    main()
