"""torch.distributed's collective calls as hook points: the classic API (``dist.all_reduce``, …) and
the c10d functional collectives (``torch.distributed._functional_collectives``, private), and
what a call was about (op, group) as plain data."""

from __future__ import annotations

from typing import Any, Callable, Mapping

# the classic API: in torch.distributed (public) and where it is defined
CLASSIC = ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
           "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier", "reduce",
           "gather", "scatter", "all_gather_object", "broadcast_object_list", "gather_object",
           "scatter_object_list", "monitored_barrier", "send", "recv", "batch_isend_irecv")
FUNCTIONAL_MODULE = "torch.distributed._functional_collectives"
FUNCTIONAL = ("all_reduce", "all_reduce_coalesced", "all_gather_tensor",
              "all_gather_into_tensor_coalesced", "reduce_scatter_tensor",
              "reduce_scatter_tensor_coalesced", "all_to_all_single", "broadcast")


def collective_hook_points() -> list[tuple[str, str]]:
    """(dotted name, op) for every collective this torch has (a missing one is left out: the
    caller wraps what exists)."""
    try:
        import torch.distributed as dist
    except ImportError:
        return []
    if not dist.is_available():
        return []
    out = []
    for mod in ("torch.distributed", "torch.distributed.distributed_c10d"):
        out += [(f"{mod}.{n}", n) for n in CLASSIC]
    try:
        import torch.distributed._functional_collectives as fc
    except ImportError:
        return out
    return out + [(f"{FUNCTIONAL_MODULE}.{n}", f"functional.{n}") for n in FUNCTIONAL
                  if callable(getattr(fc, n, None))]


_labels: dict[int, tuple[str, list[int] | None]] = {}


def collective_group(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, list[int] | None]:
    """The process group a collective call names, as a label ("default", or "ranks 0,2") and its
    global ranks (None: every rank)."""
    import torch.distributed as dist

    group = kwargs.get("group")
    if group is None:
        group = next((a for a in args if isinstance(a, dist.ProcessGroup)), None)
    if group is None or group is dist.GroupMember.WORLD:
        return "default", None
    if isinstance(group, (list, tuple)) and all(isinstance(x, int) for x in group):
        ranks = sorted(int(x) for x in group)
        return "(ranks " + ",".join(map(str, ranks)) + ")", ranks
    if not isinstance(group, dist.ProcessGroup):
        return str(group)[:80], None
    key = id(group)
    if key not in _labels:
        try:
            ranks = sorted(dist.get_process_group_ranks(group))
            name = getattr(group, "group_name", None)
            _labels[key] = (f"{'group ' + str(name) + ' ' if name else ''}(ranks "
                            + ",".join(map(str, ranks)) + ")", ranks)
        except Exception:  # noqa: BLE001 - a group this torch cannot describe
            _labels[key] = (f"group {getattr(group, 'group_name', '?')}", None)
    return _labels[key]


def same_under_dynamo(wrapper: Any, original: Any) -> Callable[[], None]:
    """Have Dynamo treat ``wrapper`` as it treats ``original`` when a compiled function calls
    it: a classic collective (``dist.all_reduce``) is rewritten into its functional form
    (``traceable_collective_remaps``), so the graph and its nodes' stack traces are the same as
    without the wrapper. Returns what undoes it."""
    try:
        import torch.distributed._functional_collectives as fc

        remaps = fc.traceable_collective_remaps
    except (ImportError, AttributeError):
        return lambda: None
    if original not in remaps:
        return lambda: None
    remaps[wrapper] = remaps[original]
    return lambda: remaps.pop(wrapper, None)
