"""torch.distributed's collective calls as hook points: the classic API (``dist.all_reduce``, …) and
the c10d functional collectives (``torch.distributed._functional_collectives``, private), and
what a call was about (op, group) as plain data."""

from __future__ import annotations

import inspect
import zlib
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


# send/recv: numbered per pair of ranks (what every rank of the pair numbers alike), the
# argument naming the peer
P2P = {"send": "dst", "recv": "src"}
# a group's ranks written out in full up to this many; a longer group is labelled by its size and
# a checksum, and an arithmetic run of ranks is written as {"first", "step", "count"}
SHORT_GROUP = 16
LONG_LIST = 64

_labels: dict[int, tuple[str, Any]] = {}


def call_arguments(fn: Any) -> list[str]:
    """The parameter names of a hooked collective, in order (to find its ``group`` argument
    given by position); empty when it has no signature."""
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _members(ranks: list[int]) -> Any:
    """Global ranks as the progress log keeps them: a list, or a long arithmetic run as
    ``{"first", "step", "count"}`` (a data-parallel group of thousands of ranks costs a few
    bytes per collective, not kilobytes)."""
    if len(ranks) > LONG_LIST:
        step = ranks[1] - ranks[0]
        if step > 0 and all(b - a == step for a, b in zip(ranks, ranks[1:])):
            return {"first": ranks[0], "step": step, "count": len(ranks)}
    return ranks


def _ranks_label(ranks: list[int], name: Any = None) -> str:
    head = f"group {name} " if name else ""
    if len(ranks) <= SHORT_GROUP:
        return head + "(ranks " + ",".join(map(str, ranks)) + ")"
    crc = zlib.crc32(",".join(map(str, ranks)).encode())
    return head + f"({len(ranks)} ranks {ranks[0]}..{ranks[-1]} #{crc:08x})"


def _from_ranks(ranks: list[int]) -> tuple[str, Any]:
    ranks = sorted(int(x) for x in ranks)
    return _ranks_label(ranks), _members(ranks)


def _group_label(group: Any) -> tuple[str, Any]:
    """(label, members) of a group argument: None or the world, a ProcessGroup, its name, a
    list of global ranks (or one list per group: the one with this rank), a DeviceMesh or
    (mesh, dim). Only groups that exist are looked up: nothing is created (that would be a
    collective of its own)."""
    import torch.distributed as dist

    if group is None or group is dist.GroupMember.WORLD:
        return "default", None
    if isinstance(group, (list, tuple)) and group and all(isinstance(x, int) for x in group):
        return _from_ranks(list(group))
    if isinstance(group, list) and group and all(isinstance(x, list) for x in group):
        me = dist.get_rank()
        mine = next((g for g in group if me in g), None)
        return _from_ranks(mine) if mine else (str(group)[:80], None)
    if isinstance(group, str):
        try:
            from torch.distributed import distributed_c10d as c10d

            group = c10d._resolve_process_group(group)
        except Exception:  # noqa: BLE001 - a name this torch cannot resolve
            return f"group {group[:80]}", None
    elif isinstance(group, tuple) and len(group) == 2 and hasattr(group[0], "get_group"):
        group = group[0].get_group(group[1])  # (DeviceMesh, dim)
    elif not isinstance(group, dist.ProcessGroup) and hasattr(group, "get_group"):
        group = group.get_group()  # a 1-D DeviceMesh
    if group is dist.GroupMember.WORLD:
        return "default", None
    if not isinstance(group, dist.ProcessGroup):
        return str(group)[:80], None
    key = id(group)
    if key not in _labels:
        try:
            ranks = sorted(dist.get_process_group_ranks(group))
            _labels[key] = (_ranks_label(ranks, getattr(group, "group_name", None)),
                            _members(ranks))
        except Exception:  # noqa: BLE001 - a group this torch cannot describe
            _labels[key] = (f"group {getattr(group, 'group_name', '?')}", None)
    return _labels[key]


def _p2p(bound: Mapping[str, Any], peer_arg: str) -> tuple[str, Any]:
    """send/recv: the pair of ranks (``p2p 0<->3``); a receive from any source, or a peer this
    torch cannot place, is this rank's own (``p2p rank 3``): no other rank is said to lag."""
    import torch.distributed as dist

    me = dist.get_rank()
    peer = bound.get(peer_arg)
    local = bound.get(f"group_{peer_arg}")
    if peer is None and isinstance(local, int):
        try:
            peer = dist.get_global_rank(bound.get("group") or dist.GroupMember.WORLD, local)
        except Exception:  # noqa: BLE001
            peer = None
    if not isinstance(peer, int) or peer == me:
        return f"p2p rank {me}", [me]
    a, b = sorted((me, peer))
    return f"p2p {a}<->{b}", [a, b]


def collective_group(op: str, names: list[str], args: tuple[Any, ...],
                     kwargs: Mapping[str, Any]) -> tuple[str, Any]:
    """The process group a call of collective ``op`` (parameter names ``names``) runs on, as a
    label every rank of it gives the same ("default", "group 3 (ranks 0,2)", "p2p 0<->1") and
    its global ranks (None: every rank; a long arithmetic run as {"first", "step", "count"})."""
    import torch.distributed as dist

    bound = dict(zip(names, args))
    bound.update(kwargs)
    if op in P2P:
        return _p2p(bound, P2P[op])
    if op == "batch_isend_irecv":  # asynchronous, to several peers: this rank's own numbering
        me = dist.get_rank()
        return f"p2p rank {me}", [me]
    group = bound.get("group")
    if group is None and not names:  # no signature: a ProcessGroup given by position
        group = next((a for a in args if isinstance(a, dist.ProcessGroup)), None)
    return _group_label(group)


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
