"""A graph that issues collectives is never run again by the eager check (re-run on one rank
alone, its collectives would pair with the other ranks' next ones): found in the Dynamo graph's
own nodes, in the bodies of its higher-order ops (activation checkpointing), and in a call's
distributed tensors (their ops issue collectives as they run). Real gloo group of one rank, real
Dynamo graphs (captured by a backend of the test's), real DTensor."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.utils.checkpoint import checkpoint

from tuidebug.compiler import accuracy, compat


@pytest.fixture
def group() -> Any:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def _dynamo_graph(fn: Any, *args: Any) -> Any:
    graphs: list[Any] = []

    def backend(gm: Any, example: Any) -> Any:
        graphs.append(gm)
        return gm.forward
    torch._dynamo.reset()
    torch.compile(fn, backend=backend, fullgraph=True)(*args)
    assert len(graphs) == 1, graphs
    return graphs[0]


def test_collectives_in_a_graph_and_in_a_checkpointed_body(group: Any) -> None:
    def top(x):
        return funcol.all_reduce(x * 2, "sum", group) + 1

    def inner(x):
        return funcol.all_reduce(torch.sin(x), "sum", group)

    def checkpointed(x):
        return checkpoint(inner, x, use_reentrant=False) * 2

    def quiet(x):
        return torch.sin(x) * 2

    x = torch.ones(4, requires_grad=True)
    said = {name: accuracy._collectives(_dynamo_graph(fn, x))
            for name, fn in (("top", top), ("checkpointed", checkpointed), ("quiet", quiet))}
    assert said == {"top": ["all_reduce"], "checkpointed": ["all_reduce"], "quiet": []}, said


def test_a_distributed_tensor_among_the_inputs(group: Any) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, distribute_tensor

    mesh = init_device_mesh("cpu", (1,))
    d = distribute_tensor(torch.ones(4), mesh, [Replicate()])
    assert compat.holds_distributed_tensor([torch.ones(1), d])
    assert not compat.holds_distributed_tensor([torch.ones(1), torch.nn.Parameter(torch.ones(1))])
    assert accuracy._talks_at_call([d], None).startswith("not compared: the graph issues "
                                                          "collectives (a distributed tensor's")
    assert accuracy._talks_at_call([torch.ones(1)], lambda: True).startswith(
        "not compared: the graph issues collectives (in its post-grad graph)")
    assert accuracy._talks_at_call([torch.ones(1)], lambda: False) == ""


class _Unreadable:
    """A graph module whose submodules cannot be listed."""

    def modules(self) -> Any:
        raise RuntimeError("no modules here")


def _cannot_tell() -> bool:
    raise RuntimeError("no post-grad graph")


def test_on_a_jobs_rank_a_graph_whose_collectives_cannot_be_read_is_not_run_again(
        group: Any) -> None:
    """The checks failed open: an error reading the graph read as 'issues none', and a graph
    that may issue collectives was run again on this rank alone."""
    from tuidebug.compiler import mutations

    said = accuracy._why_not_compared(mutations.MutatedState([], []), _Unreadable())
    assert said.startswith("not compared: could not tell whether the graph issues collectives "
                           "(RuntimeError: no modules here)"), said
    said = accuracy._talks_at_call([torch.ones(1)], _cannot_tell)
    assert said.startswith("not compared: could not tell whether the graph issues collectives "
                           "(RuntimeError: no post-grad graph)"), said


def test_outside_a_job_an_unreadable_graph_is_compared() -> None:
    from tuidebug.compiler import mutations

    assert not dist.is_initialized()
    assert accuracy._why_not_compared(mutations.MutatedState([], []), _Unreadable()) == ""
    assert accuracy._talks_at_call([torch.ones(1)], _cannot_tell) == ""
