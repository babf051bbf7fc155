"""Compile the same computation twice in one process: the second compile can hit the FX graph cache.

Two functions with identical bodies are two Dynamo frames (compile ids 0/0 and 1/0) whose FX
graphs, inputs and config are the same, so Inductor's FX graph cache key is the same: with
``fx_graph_cache=True`` (and caches not force-disabled) the second compile is a cache hit
(``counters["inductor"]["fxgraph_cache_hit"]`` in ``compiles/1_0.json``), with it off both compile.

    tuidebug flags demo fx_graph_cache
    tuidebug flags demo force_disable_caches
"""
import argparse

import torch


def first(x):
    return (x.sin() + x.cos()).relu() * 2


def second(x):
    return (x.sin() + x.cos()).relu() * 2


def main():
    parser = argparse.ArgumentParser(description="the same graph compiled twice")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(64, 64, device=args.device)
    a = torch.compile(first)(x)
    b = torch.compile(second)(x)
    print(f"cache_twice: equal={torch.equal(a, b)} sum={a.sum().item():.4f}")


if __name__ == "__main__":
    main()
