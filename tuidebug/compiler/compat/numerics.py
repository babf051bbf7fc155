"""What the numerics check needs of Inductor's objects, as plain data: what Inductor lowered
(the post-grad graph, each buffer's FX node); the values a compiled graph's kernels write,
recorded while it runs; every node's eager and float64 value of the post-grad graph. (The
source each input of a Dynamo graph was read from is ``source_names``'.)"""

from __future__ import annotations

from typing import Any, Callable

import torch

from tuidebug.compiler.compat.lookup import NotAvailable


# -- intermediate values of a compiled graph ----------------------------------------------------

COMPILED_GRAPH_CALL = "torch._inductor.output_code.CompiledFxGraph.__call__"


def lowered_graph(lowering: Any) -> tuple[Any, dict[str, str]]:
    """What an Inductor ``GraphLowering`` lowered, once its ``run`` is done: the post-grad FX
    graph module, and each buffer's FX node — the node whose value the buffer holds (Inductor's
    ``origin_node``); a buffer without one (a second output of a reduction) is left out."""
    gm = getattr(lowering, "module", None)
    origins: dict[str, str] = {}
    for name, buf in dict(getattr(lowering, "name_to_buffer", {}) or {}).items():
        node = getattr(buf, "origin_node", None)
        if node is not None and getattr(node, "name", None):
            origins[str(name)] = str(node.name)
    return gm, origins


def _module_of(compiled: Any, known: dict[int, Any]) -> Any:
    """The key in ``known`` (``id`` of a generated wrapper module's globals → key) of the module
    whose ``call`` this compiled graph runs. Its ``current_callable`` may be wrapped (on a GPU
    Inductor aligns the inputs in a closure around it; CUDA graphs wrap it too): the wrappers'
    ``__wrapped__``, bound ``__func__`` and closure cells are followed, a few levels deep."""
    todo, seen = [getattr(compiled, "current_callable", None)], set()
    for _ in range(64):
        if not todo:
            break
        fn = todo.pop(0)
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        fn = getattr(fn, "__func__", fn)
        key = known.get(id(getattr(fn, "__globals__", None)))
        if key is not None:
            return key
        todo.append(getattr(fn, "__wrapped__", None))
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if callable(value):
                todo.append(value)
    return None


class IntermediateValues:
    """While open, records what a run of compiled graphs computes, for the modules given
    (``{key: wrapper module}``): ``inputs[key]``, copies of the inputs of the module's graph
    (the first call of it), and ``calls[key]``: per call of a generated kernel, in execution
    order, ``(kernel name, {arg position: copy of the tensor after the call})`` for the
    positions ``outputs(key, kernel, n)`` names (n: that kernel's n-th call). ``close()``
    puts every original back."""

    def __init__(self, modules: dict[Any, Any], kernels: dict[Any, list[str]],
                 outputs: Callable[[Any, str, int], list[int]]) -> None:
        from tuidebug.compiler.compat.kernels import wrap_kernel
        from tuidebug.compiler.compat.lookup import Patcher

        self.inputs: dict[Any, list[Any]] = {}
        self.calls: dict[Any, list[tuple[str, dict[int, Any]]]] = {k: [] for k in modules}
        self._patcher = Patcher(lambda msg: None)
        self._undo: list[Callable[[], None]] = []
        by_dict = {id(vars(m)): k for k, m in modules.items()}
        inputs = self.inputs

        def wrap_call(orig: Callable[..., Any]) -> Callable[..., Any]:
            def __call__(self_: Any, args: Any) -> Any:
                key = _module_of(self_, by_dict)
                if key is not None and key not in inputs:
                    inputs[key] = [a.detach().clone() if isinstance(a, torch.Tensor) else a
                                   for a in args]
                return orig(self_, args)
            return __call__

        try:
            if not self._patcher.wrap(COMPILED_GRAPH_CALL, wrap_call):
                raise NotAvailable(COMPILED_GRAPH_CALL)
            for key, mod in modules.items():
                for name in kernels.get(key, []):
                    undo = wrap_kernel(mod, name, self._recorder(key, name, outputs))
                    if undo is not None:
                        self._undo.append(undo)
        except BaseException:
            self.close()
            raise

    def _recorder(self, key: Any, name: str, outputs: Callable[[Any, str, int], list[int]]
                  ) -> Callable[[Callable[..., Any], bool], Callable[..., Any]]:
        sink = self.calls[key]
        count = [0]

        def wrap(fn: Callable[..., Any], is_triton: bool) -> Callable[..., Any]:
            def call(*args: Any, **kwargs: Any) -> Any:
                out = fn(*args, **kwargs)
                n, count[0] = count[0], count[0] + 1
                got = {}
                for i in outputs(key, name, n):
                    if i < len(args) and isinstance(args[i], torch.Tensor):
                        got[i] = args[i].detach().clone()
                sink.append((name, got))
                return out
            return call
        return wrap

    def close(self) -> None:
        while self._undo:
            self._undo.pop()()
        self._patcher.restore()

    def __enter__(self) -> "IntermediateValues":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class NodeValues(torch.fx.Interpreter):
    """Every node's value of a post-grad FX graph run eagerly: run it under
    ``judge.KeptWide`` on inputs upcast to float64 for the float64 reference, as the graph's
    verdict does (its casts, ``dtype=`` and held constants kept in float64)."""

    def __init__(self, gm: Any) -> None:
        super().__init__(gm, garbage_collect_values=False)
        self.values: dict[str, Any] = {}

    def run_node(self, n: Any) -> Any:
        value = super().run_node(n)
        self.values[n.name] = value
        return value
