"""Inductor's config, caches and counters, autotune feedback, and its scheduler nodes as JSON."""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import sys
from typing import Any, Callable, Iterator, Mapping

from tuidebug.compiler.compat.lookup import NotAvailable


# -- Inductor config -----------------------------------------------------------------------------

def inductor_config_values() -> dict[str, Any]:
    from torch._inductor import config

    return dict(config.get_config_copy())


def inductor_config_value(name: str) -> Any:
    """One Inductor config value in force now (None where this torch has no such flag)."""
    from torch._inductor import config

    return getattr(config, name, None)


def inductor_config_defaults() -> dict[str, Any]:
    from torch._inductor import config

    entries = getattr(config, "_config", None)
    if not isinstance(entries, dict):
        raise NotAvailable("torch._inductor.config._config (config defaults)")
    return {k: getattr(e, "default", None) for k, e in entries.items()}


def inductor_config_patch(changes: dict[str, Any]) -> Any:
    from torch._inductor import config

    return config.patch(changes)


# Caches whose hit would skip the compile work a trace records. The kernel (code) cache stays
# on: it only skips re-running the C++/Triton compiler on identical source.
CACHES_OFF = {
    "fx_graph_cache": False,                              # torch._inductor.config
    "functorch.enable_autograd_cache": False,             # torch._functorch.config
    "dynamo.automatic_dynamic_local_pgo": False,          # torch._dynamo.config
}


# A --set of one of these flags decides it and the caches layered on it: the AOTAutograd cache
# stores FX-graph-cache entries (torch bypasses it while fx_graph_cache is off).
_CACHES_UNDER = {"fx_graph_cache": ("functorch.enable_autograd_cache",)}


def caches_off(user_sets: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings of CACHES_OFF a capture applies when the user also sets the Inductor flags
    ``user_sets``: a cache flag among them (and the caches layered on it) is left to the user."""
    left = set(user_sets or ())
    for name in user_sets or ():
        left.update(_CACHES_UNDER.get(name, ()))
    return {k: v for k, v in CACHES_OFF.items() if k not in left}


@contextlib.contextmanager
def caches_off_patch(settings: Mapping[str, Any] | None = None) -> Iterator[None]:
    """``settings`` (default: all of CACHES_OFF; keys as there) in force in this thread inside
    the block, on the configs this torch has."""
    undo = [set_flags(importlib.import_module(name), flags, known_only=True)
            for name, flags in config_modules(CACHES_OFF if settings is None else settings).items()]
    try:
        yield
    finally:
        for put_back in reversed(undo):
            put_back()


# The config modules a setting goes to, by its key's prefix (as CACHES_OFF's keys name them):
# ``functorch.NAME``, ``dynamo.NAME``; any other key is an Inductor flag.
CONFIG_MODULES = {"functorch": "torch._functorch.config", "dynamo": "torch._dynamo.config"}
INDUCTOR_CONFIG = "torch._inductor.config"


def config_modules(settings: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``settings`` (keys as CACHES_OFF's) by the config module each goes to, as its flags."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in settings.items():
        prefix, _, name = key.partition(".")
        module = CONFIG_MODULES.get(prefix)
        out.setdefault(module or INDUCTOR_CONFIG, {})[name if module else key] = value
    return out


def set_flags(module: Any, flags: Mapping[str, Any], *,
              known_only: bool = False) -> Callable[[], None]:
    """Set ``flags`` on config module ``module``; returns what puts back the values they had.
    Since torch 2.13 a config value is per thread (a context variable per flag, which a new
    thread starts without): both take effect in the calling thread. ``known_only``: a flag
    this torch lacks is left out (else it raises AttributeError, nothing set)."""
    if known_only:
        flags = {k: v for k, v in flags.items()
                 if k in getattr(module, "_config", {}) or hasattr(module, k)}
    prior = {k: getattr(module, k) for k in flags}
    for k, v in flags.items():
        setattr(module, k, v)

    def put_back() -> None:
        for k, v in prior.items():
            setattr(module, k, v)
    return put_back


def missing_flags(settings: Mapping[str, Any]) -> list[str]:
    """The keys of ``settings`` (as CACHES_OFF's) that this torch has no flag for (their config
    modules are imported to know)."""
    missing = []
    for key in settings:
        prefix, _, name = key.partition(".")
        module_name = CONFIG_MODULES.get(prefix)
        flag = name if module_name else key
        module = importlib.import_module(module_name or INDUCTOR_CONFIG)
        if flag not in (getattr(module, "_config", None) or {}) and not hasattr(module, flag):
            missing.append(key)
    return missing


def config_per_thread(module: Any) -> bool:
    """Whether config module ``module``'s values are per thread (torch 2.13 on: a context
    variable per flag): a value set in one thread is seen, and can be put back, only there."""
    entries = getattr(module, "_config", None) or {}
    entry = next(iter(entries.values()), None)
    return isinstance(getattr(entry, "user_override", None), contextvars.ContextVar)


def loaded_config_modules(settings: Mapping[str, Any]) -> list[tuple[str, Any, dict[str, Any]]]:
    """``settings`` (keys as CACHES_OFF's) as (module name, module, flags) for each config module
    already loaded (none is imported)."""
    return [(name, sys.modules[name], flags) for name, flags in config_modules(settings).items()
            if name in sys.modules]


def counters_snapshot() -> dict[str, dict[str, int]]:
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    return {k: dict(v) for k, v in counters.items()}


# -- autotuning ----------------------------------------------------------------------------------

def add_autotune_feedback(fn: Callable[..., None]) -> Callable[[], None]:
    """Register ``fn`` as an autotune feedback saver; returns a function that removes it."""
    try:
        from torch._inductor import select_algorithm as sa
    except ImportError as e:
        raise NotAvailable("torch._inductor.select_algorithm") from e
    if not hasattr(sa, "add_feedback_saver"):
        raise NotAvailable("torch._inductor.select_algorithm.add_feedback_saver")
    sa.add_feedback_saver(fn)

    def remove() -> None:
        getter = getattr(sa, "get_algorithm_selector_cache", None)
        cache = getter() if getter else getattr(sa, "_ALGORITHM_SELECTOR_CACHE", None)
        fns = getattr(cache, "feedback_saver_fns", None)
        if isinstance(fns, list) and fn in fns:
            fns.remove(fn)

    return remove


def choice_info(choice: Any) -> dict[str, Any]:
    """What an autotune choice is: name, description and its config (tiles, stages, warps)."""
    info: dict[str, Any] = {"name": str(getattr(choice, "name", choice))}
    desc = getattr(choice, "description", None)
    if desc:
        info["description"] = str(desc)
    try:
        d = choice.info_dict()
        info["config"] = {str(k): v if isinstance(v, (int, float, str, bool, type(None)))
                          else str(v) for k, v in d.items()}
    except Exception:
        pass
    info["kind"] = type(choice).__name__
    return info


def ir_node_size(node: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        out["shape"] = [str(s) for s in node.get_size()]
    except Exception:
        pass
    try:
        out["dtype"] = str(node.get_dtype()).replace("torch.", "")
    except Exception:
        pass
    try:
        out["name"] = node.get_name()
    except Exception:
        pass
    return out


# -- scheduler nodes -----------------------------------------------------------------------------

def scheduler_node_json(snode: Any) -> dict[str, Any]:
    """A scheduler node (possibly fused) as JSON: members, FX origins, dependencies."""
    def safe(f: Callable[[], Any], default: Any = None) -> Any:
        try:
            return f()
        except Exception:
            return default

    members = safe(lambda: [n.get_name() for n in snode.get_nodes()], [])
    origins: list[str] = []
    for m in safe(lambda: list(snode.get_nodes()), []) or [snode]:
        node = getattr(m, "node", None)
        for o in sorted(safe(lambda: node.origins, ()) or (), key=lambda o: o.name):
            if o.name not in origins:
                origins.append(o.name)
    rw = getattr(snode, "read_writes", None)
    return {
        "name": safe(snode.get_name, "?"),
        "type": type(snode).__name__,
        "ir_type": type(getattr(snode, "node", None)).__name__ if getattr(snode, "node", None)
        is not None else None,
        "members": members,
        "origins": origins,
        "reads": sorted(safe(lambda: [d.name for d in rw.reads], []) or []),
        "writes": sorted(safe(lambda: [d.name for d in rw.writes], []) or []),
        "accesses": safe(lambda: buffer_accesses(rw), []),
        "users": safe(lambda: _node_users(snode, members), []),
        "device": str(safe(snode.get_device, "")),
        "is_reduction": bool(safe(snode.is_reduction, False)),
        "is_extern": bool(safe(snode.is_extern, False)),
        "is_template": bool(safe(snode.is_template, False)),
    }


def buffer_accesses(rw: Any) -> list[dict[str, Any]]:
    """A node's memory reads and writes with their index expressions (MemoryDep: the index
    over the loop variables, sympy's text, and each variable's range); a dependency without
    an index (a whole buffer: StarDep, WeakDep) is left out."""
    out: list[dict[str, Any]] = []
    for mode, deps in (("read", rw.reads), ("write", rw.writes)):
        for d in sorted(deps, key=lambda d: (str(d.name), str(getattr(d, "index", "")))):
            index = getattr(d, "index", None)
            if index is None:
                continue
            names = [str(v) for v in getattr(d, "var_names", ()) or ()]
            sizes = [str(v) for v in getattr(d, "size", ()) or ()]
            out.append({"buffer": str(d.name), "mode": mode, "index": str(index),
                        "ranges": dict(zip(names, sizes))})
    return out[:64]


def _node_users(snode: Any, members: list[str]) -> list[str]:
    """The scheduler nodes that read what ``snode`` writes, by the names of the current node
    list (a user fused into another node is named by that node); not ``snode`` itself, not the
    graph's output. Torch 2.6+ keeps the users on the node's output buffers."""
    if hasattr(snode, "get_outputs"):
        users = [u for buf in snode.get_outputs() for u in getattr(buf, "users", ())]
    else:
        users = list(getattr(snode, "users", ()))
    fused = getattr(getattr(snode, "scheduler", None), "name_to_fused_node", None) or {}
    names = set()
    for u in users:
        if type(getattr(u, "node", None)).__name__ == "OutputNode":
            continue
        name = u.get_name()
        names.add(fused[name].get_name() if name in fused else name)
    return sorted(names - set(members) - {snode.get_name()})


def scheduler_node_text(snode: Any) -> str:
    try:
        return str(snode.debug_str())
    except Exception as e:
        return f"{getattr(snode, 'get_name', lambda: '?')()}: <debug_str failed: {e}>"


def kernel_provenance_args(node_schedule: Any, is_extern: bool) -> dict[str, Any]:
    """IR nodes and FX origins of the nodes one kernel computes (provenance hook arguments)."""
    ir_nodes: list[str] = []
    fx_nodes: list[str] = []
    stack: list[str] = []
    items = [node_schedule] if is_extern else list(node_schedule or [])
    for item in items:
        node = item if is_extern else getattr(item, "node", None)
        if node is None:
            continue
        try:  # an extern kernel is an IR buffer (buf5); IR files name its operation (op5)
            op_name = getattr(item, "get_operation_name", None) if is_extern else None
            ir_nodes.append(str((op_name and op_name()) or item.get_name()))
        except Exception:
            pass
        for o in getattr(node, "origins", ()) or ():
            if o.name not in fx_nodes:
                fx_nodes.append(o.name)
        try:
            for s in node.get_stack_traces():
                if s not in stack:
                    stack.append(s)
        except Exception:
            pass
    return {"ir_nodes": ir_nodes, "fx_nodes": fx_nodes, "stack_traces": stack}
