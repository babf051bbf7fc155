"""torch.distributed as the capture sees it, as plain data: the collectives an FX graph issues
(functional collectives ``_c10d_functional.*`` and the ``c10d.*`` ops), the process groups they
name, and the buckets DDPOptimizer split a graph into."""

from __future__ import annotations

from typing import Any, Iterator

import torch

from tuidebug.compiler.compat.lookup import NotAvailable
from tuidebug.compiler.compat.process import is_op_overload

# The op namespaces whose ops talk to other ranks (wait_tensor included: it completes one).
COLLECTIVE_NAMESPACES = ("_c10d_functional", "c10d", "_c10d_functional_autograd")
# DDPOptimizer (torch.compile of a DistributedDataParallel module) splits the Dynamo graph at
# its gradient buckets and compiles each piece; it keeps the buckets on itself (``self.buckets``).
DDP_COMPILE_FN = "torch._dynamo.backends.distributed.DDPOptimizer.compile_fn"


def _op_name(target: Any) -> tuple[str, str] | None:
    """(namespace, op name without overload) of an op overload, or of an overload packet (as
    Dynamo's graph calls them): ``("_c10d_functional", "all_reduce_")``."""
    if not is_op_overload(target):
        return None
    try:
        qual = (str(target._qualified_op_name)  # a packet: "_c10d_functional::all_reduce"
                if isinstance(target, torch._ops.OpOverloadPacket)
                else str(target._schema.name))  # "_c10d_functional::all_reduce_"
    except Exception:
        return None
    ns, _, name = qual.partition("::")
    return (ns, name) if name else None


def _bound_arguments(node: torch.fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name (``group_name``, ``reduce_op``, ``group_size``…)."""
    out: dict[str, Any] = {}
    try:
        params = [a.name for a in node.target._schema.arguments]  # type: ignore[union-attr]
    except Exception:
        return dict(node.kwargs)
    for name, value in zip(params, node.args):
        out[name] = value
    out.update(node.kwargs)
    return out


def _group_name(value: Any) -> str | None:
    """A group argument as its name: a string already, or a ProcessGroup object's name."""
    if value is None:
        return None
    if isinstance(value, (str, int)):
        return str(value)
    name = getattr(value, "group_name", None)
    return str(name) if name is not None else repr(value)[:80]


def _plain(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, torch.fx.Node):
        return {"node": value.name}
    return str(value)


def collective_nodes(graph: torch.fx.Graph) -> Iterator[dict[str, Any]]:
    """Every collective (and wait) of ``graph`` in FX order: ``position`` (index in the graph),
    ``node``, ``namespace``, ``op``, ``target``, ``group`` (name), ``group_size``, ``reduce_op``,
    the other scalar arguments, the tensor ``inputs`` (nodes) and the node itself (``fx``: for
    its meta, read by the caller), ``waits_for`` for a wait."""
    for position, n in enumerate(graph.nodes):
        if n.op != "call_function":
            continue
        name = _op_name(n.target)
        if name is None or name[0] not in COLLECTIVE_NAMESPACES:
            continue
        bound = _bound_arguments(n)
        group = next((bound[k] for k in ("group_name", "process_group", "group")
                      if k in bound), None)
        inputs = [a for a in n.all_input_nodes]
        rec: dict[str, Any] = {
            "position": position, "node": n.name, "namespace": name[0], "op": name[1],
            "target": str(n.target), "group": _group_name(group), "fx": n, "inputs": inputs,
            "args": {k: _plain(v) for k, v in bound.items()
                     if k not in ("group_name", "process_group", "group", "input", "inputs",
                                  "tensor", "tensors", "out", "output")
                     and not isinstance(v, torch.fx.Node)},
        }
        if name[1] == "wait_tensor":
            rec["waits_for"] = inputs[0].name if inputs else None
        yield rec


def holds_distributed_tensor(values: list[Any]) -> bool:
    """Whether ``values`` (a call's flat arguments) hold a distributed tensor (DTensor), whose
    ops issue collectives as they run: by its class, nothing imported."""
    for v in values:
        t = type(v)
        if t.__name__ == "DTensor" and t.__module__.startswith("torch.distributed"):
            return True
    return False


def process_group_info(name: str) -> dict[str, Any] | None:
    """The live process group called ``name``: its ranks (global), size, backend, description;
    None when there is no such group (or torch.distributed is not initialised)."""
    try:
        import torch.distributed as dist
        from torch.distributed import distributed_c10d as c10d

        if not dist.is_available() or not dist.is_initialized():
            return None
        pg = c10d._resolve_process_group(name)
    except Exception:
        return None
    info: dict[str, Any] = {"name": name}
    for key, fn in (("ranks", lambda: list(dist.get_process_group_ranks(pg))),
                    ("size", pg.size), ("backend", lambda: str(dist.get_backend(pg))),
                    ("desc", lambda: str(getattr(pg, "group_desc", "") or ""))):
        try:
            info[key] = fn()
        except Exception:
            info[key] = None
    return info


def this_rank() -> int | None:
    """This process's global rank, None outside an initialised process group."""
    try:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_available() and dist.is_initialized() else None
    except Exception:
        return None


# Set on init_process_group (the new default group) and destroy_process_group (None).
DEFAULT_GROUP_SET = "torch.distributed.distributed_c10d._update_default_pg"
_GROUPS_MADE = [0]


def count_default_groups(patcher: Any) -> bool:
    """Count the default process groups this process makes from now on (``default_groups``):
    ``destroy_process_group`` resets torch's own group count, so a default group made again
    on the same store has the same key prefix there as the last one, and a key written for the
    last group reads as written for this one. False where this torch has no such hook point."""
    def make(original: Any) -> Any:
        def counted(pg: Any, *args: Any, **kwargs: Any) -> Any:
            if pg is not None:
                _GROUPS_MADE[0] += 1
            return original(pg, *args, **kwargs)
        return counted
    return bool(patcher.wrap(DEFAULT_GROUP_SET, make))


def default_groups() -> int:
    """How many default process groups this process made since ``count_default_groups``: the
    same on every rank of a job that makes them alike (each rank runs the same script)."""
    return _GROUPS_MADE[0]


def default_store() -> Any:
    """The store of the default process group, through which its ranks met (a TCPStore under
    torchrun, the file of a FileStore): ``NotAvailable`` where this torch has no way to it."""
    from torch.distributed import distributed_c10d as c10d

    get = getattr(c10d, "_get_default_store", None)
    if get is None:
        raise NotAvailable("torch.distributed.distributed_c10d._get_default_store")
    return get()


def ddp_buckets(optimizer: Any) -> tuple[list[dict[str, Any]], int | None, int | None]:
    """The buckets DDPOptimizer made in its last ``compile_fn`` (in graph order: bucket i is the
    graph piece ``submod_i``), with its byte caps: ``([{"index", "bytes", "params",
    "nodes", "extended_ops"}], bucket_bytes_cap, first_bucket_cap)``."""
    out = []
    for i, b in enumerate(getattr(optimizer, "buckets", None) or []):
        out.append({"index": i, "bytes": int(getattr(b, "size", 0) or 0),
                    "params": [str(p) for p in getattr(b, "params", []) or []],
                    "nodes": len(getattr(b, "nodes", []) or []),
                    "extended_ops": int(getattr(
                        b, "opcount_increased_to_capture_external_output", 0) or 0)})
    cap = getattr(optimizer, "bucket_bytes_cap", None)
    first = getattr(optimizer, "first_bucket_cap", None)
    return out, (int(cap) if isinstance(cap, int) else None), (
        int(first) if isinstance(first, int) else None)
