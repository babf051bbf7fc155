"""Compare a compiled graph against eager on the same inputs, judged by ``judge.judge``.

The first call of each compiled graph is also run eagerly and, on inputs upcast to float64,
eagerly again (the reference); ``judge`` decides per output. A graph that draws random numbers
(dropout, ``rand``, …) is not compared unless Inductor's ``fallback_random`` was on when it was
compiled (then both sides draw the same numbers from the same seed): compiled and eager draw
different numbers otherwise, and any difference would be a false alarm. Nor is a graph that
writes in place into tensors it did not make (``mutations``: a compiled optimizer step): any
re-run would apply its writes to the program's state a second time.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from tuidebug.compiler import compat, gradients, judge, mutations, wide_reference
from tuidebug.compiler.copies import WideCopy, strided_copy
from tuidebug.compiler.gradients import GradCall

def _op_name(target: Any) -> str:
    name = target if isinstance(target, str) else getattr(target, "__name__", "") or ""
    return name.split(".")[0] if "." in name and not isinstance(target, str) else name


def random_ops(gm: Any) -> list[str]:
    """The random ops a graph calls (sorted names), from its FX nodes; a module called as a
    whole counts when it is a dropout in training mode."""
    found: set[str] = set()
    graph = getattr(gm, "graph", None)
    for node in getattr(graph, "nodes", ()):
        if node.op in ("call_function", "call_method"):
            name = _op_name(node.target)
            if name in judge.RANDOM_OPS and judge.draws(name, node.args, node.kwargs):
                found.add(name)
        elif node.op == "call_module":
            try:
                mod = gm.get_submodule(node.target)
            except AttributeError:
                continue
            if "dropout" in type(mod).__name__.lower() and mod.training and \
                    getattr(mod, "p", 0) != 0:
                found.add(type(mod).__name__)
    return sorted(found)


def _clone(x: Any) -> Any:
    """A copy of an input to re-run a graph on: a tensor keeps its strides (the compiled
    graph asserts them), ``copies.strided_copy``."""
    if isinstance(x, torch.Tensor):
        return strided_copy(x)
    return x


def _quiet() -> Any:
    """This thread's output dropped while a graph is re-run for the check: a failing FX graph
    prints its traceback to stderr before it raises ("Call using an FX-traced Module …"), in a
    run whose own outputs had no error; the failure is kept in the check's record instead."""
    from tuidebug.compiler.capture.quiet import quiet_thread  # capture imports this module

    return quiet_thread()


def _reference(eager: Callable[..., Any], inputs: list[Any], rng: tuple[Any, Any]
               ) -> tuple[Any, str, wide_reference.Wide]:
    """(the eager graph's outputs on ``inputs`` upcast to float64, its casts to narrower
    floats kept in float64 (``wide_reference``), "", what that run met) or (None, why not, …)."""
    met = wide_reference.Wide()
    if not any(isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())
               for x in inputs):
        return None, "no floating-point inputs", met
    try:
        _set_rng_state(rng)
        with torch.no_grad(), _quiet():
            out, met = wide_reference.run(eager, [judge.upcast(x) for x in inputs])
            return out, "", met
    except torch.cuda.OutOfMemoryError:
        return None, "out of memory", met
    except Exception as e:  # an op without float64 support, a dtype fixed inside the graph
        first = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
        return None, f"{type(e).__name__}: {first}", met


def compare(out: Any, ref: Any, eager: Callable[..., Any], inputs: list[Any],
            rng: tuple[Any, Any], random: list[str], tol: float | None,
            grad: GradCall | None = None,
            names: gradients.GraphNames | None = None,
            restore: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """The judge's verdict on ``out`` (compiled) against ``ref`` (eager), with the float64
    reference where one is sound (not for a graph that draws random numbers: a float64 run may
    draw other numbers); each output named (``gradients.output_names``). With ``grad`` (the
    call ran under autograd), the gradients judged too (``gradients``): the verdict is a match
    only when the outputs and the gradients are. ``restore`` puts the inputs the graph writes
    in place back to their state before the user's call, before each re-run."""
    met = wide_reference.Wide()
    if random:
        fp64, why = None, judge.RANDOM_WHY
    else:
        fp64, why, met = _reference(eager, inputs, rng)
    result = judge.judge(out, ref, fp64, tol, why,
                         met.outputs if fp64 is not None else None)
    result["reference"] = met.label() if fp64 is not None else f"eager only: {why}"
    if fp64 is not None and met.kept:
        result["kept_in_float64"] = met.kept[:20]
    names = names or gradients.graph_names(eager)
    _name_outputs(result, names.outputs)
    if grad is not None:
        try:
            def reset() -> None:
                _set_rng_state(rng)
                restore()
            grads = gradients.judge_gradients(grad, eager, inputs, names.inputs, reset, tol,
                                              why if random else "")
        except Exception as e:  # a backward that fails here must not break the user's run
            grads = {"skipped": f"the backward re-run failed: {type(e).__name__}: "
                                f"{str(e).strip()[:300]}"}
        result["gradients"] = grads
        if grads.get("close") is False and result["close"]:
            result.update(close=False, rule=grads["rule"], detail=grads["detail"],
                          max_abs=max(result["max_abs"], grads["max_abs"]),
                          max_rel=max(result["max_rel"], grads["max_rel"]))
    return result


def _name_outputs(result: dict[str, Any], names: list[str]) -> None:
    """``name`` on each judged output; the detail names the output that decided."""
    for o in result.get("outputs") or []:
        if isinstance(o.get("index"), int) and o["index"] < len(names):
            o["name"] = names[o["index"]]
    detail = str(result.get("detail") or "")
    m = detail.split(":", 1)
    if m[0].startswith("output ") and m[0][7:].isdigit() and int(m[0][7:]) < len(names):
        result["detail"] = names[int(m[0][7:])] + ":" + m[1]


def _rng_state() -> tuple[Any, Any]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple[Any, Any]) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state_all(state[1])


def _grad_call(compiled: Callable[..., Any], flat: list[Any], as_list: bool) -> GradCall | None:
    if not torch.is_grad_enabled():
        return None
    flags = [isinstance(a, torch.Tensor) and a.requires_grad for a in flat]
    if not any(flags):
        return None

    def run(args: list[Any]) -> Any:
        with torch.enable_grad():
            return compiled(list(args)) if as_list else compiled(*args)
    return GradCall(flags, run)


def restorer(inputs: list[Any], written: list[int]) -> Callable[[], None]:
    """A function that puts the inputs at ``written`` (those the graph writes in place) of
    ``inputs`` (copies of the user's call's) back to the values they have now."""
    kept = {i: _clone(inputs[i]) for i in written
            if i < len(inputs) and isinstance(inputs[i], torch.Tensor)}

    def restore() -> None:
        with torch.no_grad():
            for i, v in kept.items():
                inputs[i].copy_(v)
    return restore


def _snapshot(value: Any) -> Any:
    """``value`` (a graph's outputs) with every tensor copied: an output aliasing an input that
    a later re-run writes into keeps what this run returned."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_snapshot(v) for v in value)
    return value


def _time_again(compiled: Callable[..., Any], inputs: list[Any], as_list: bool,
                time_kernels: Callable[[Callable[[], Any], Callable[[], None]], None],
                restore: Callable[[], None] = lambda: None) -> None:
    """Hand ``time_kernels`` a function that runs ``compiled`` once more on ``inputs`` (the
    eager run's copies; the user's tensors are not touched) and ``restore``, to call before
    each run, unclocked: it puts the inputs the graph writes in place back to their state
    before the user's call (a graph that advances a cache in place would run past its end).
    The run itself copies nothing: a copy of a whole static KV cache inside it padded every
    clocked run, and pulled compiled-against-eager towards 1. The RNG state is put back
    after."""
    def again() -> Any:
        with torch.no_grad():
            return compiled(list(inputs)) if as_list else compiled(*inputs)

    state = _rng_state()
    try:
        time_kernels(again, restore)
    finally:
        _set_rng_state(state)


def _localized(localize: Callable[[Callable[[], Any], Callable[[], None]], dict[str, Any]],
               compiled: Callable[..., Any], inputs: list[Any], as_list: bool,
               grad: GradCall | None, rng: tuple[Any, Any], after: tuple[Any, Any],
               mismatch: bool, restore: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """``localize`` given a run of the compiled graph on copies of ``inputs`` from the RNG
    state of the user's call (forward and backward when ``grad``); the RNG state put back."""
    def step() -> None:
        _set_rng_state(rng)
        restore()
        if grad is not None:
            gradients.forward_backward(grad, inputs)
        else:
            with torch.no_grad():
                compiled(list(inputs)) if as_list else compiled(*inputs)
    try:
        if grad is not None:
            step()  # AOTAutograd compiles the backward graph at its first backward: now
        report = localize(step, lambda: _set_rng_state(rng))
        if report.get("first") is None and report.get("graphs") and "note" not in report:
            report["note"] = (
                "every kernel computes what its post-grad graph computes eagerly: the "
                "difference was made before the kernels (a graph pass, a decomposition) or "
                "in an extern kernel's last use") if mismatch else "no kernel diverges"
        return report
    except Exception as e:  # finding the kernel is a bonus: the verdict stands
        return {"skipped": f"the kernels were not judged: {type(e).__name__}: "
                           f"{str(e).strip()[:300]}"}
    finally:
        _set_rng_state(after)


def _listed(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _collectives(gm: Any) -> list[str]:
    """The collectives ``gm``'s graph issues (op names, each once, waits left out), the bodies
    of its higher-order ops included (activation checkpointing, ``invoke_subgraph``, an
    autograd.Function: submodules of the graph module). An odd graph raises."""
    ops: list[str] = []
    modules = list(gm.modules()) if hasattr(gm, "modules") else [gm]
    for m in modules:
        graph = getattr(m, "graph", None)
        if graph is not None:
            ops += [c["op"] for c in compat.collective_nodes(graph) if c["op"] != "wait_tensor"]
    return list(dict.fromkeys(ops))


def _untold(e: Exception) -> str:
    """Why a graph whose collectives could not be read (``e``) is not run again, where this
    process is one rank of a job ("" where it is not: no other rank to pair with)."""
    if compat.this_rank() is None:
        return ""
    return ("not compared: could not tell whether the graph issues collectives "
            f"({type(e).__name__}: {str(e).strip()[:200]}); running it again on this rank "
            "alone might pair its collectives with the other ranks' next ones")


def talks(ops: list[str]) -> str:
    """Why a graph that issues collectives (``ops``) is not run again."""
    return ("not compared: the graph issues collectives (" + ", ".join(ops) + "); running "
            "it again, eagerly or to time its kernels, would issue them again on this rank "
            "alone, where the other ranks may not (a compile only some ranks make): they "
            "would pair with the other ranks' next collectives and change what the job "
            "computes")


def _talks_at_call(flat: list[Any], issues: Callable[[], bool] | None) -> str:
    """Why this call's graph is not run again, known only at its call: a distributed tensor
    among its inputs (whose ops issue collectives as they run), or collectives its post-grad
    graph issues ("" when neither); where that cannot be told on a job's rank, why
    (``_untold``)."""
    try:
        if compat.holds_distributed_tensor(flat):
            return talks(["a distributed tensor's ops"])
        if issues is not None and issues():
            return talks(["in its post-grad graph"])
    except Exception as e:  # noqa: BLE001 - on a job's rank: not run again (_untold)
        return _untold(e)
    return ""


def _why_not_compared(mutated: mutations.MutatedState, gm: Any) -> str:
    """Why a graph that writes in place into what it did not make is not compared (""
    when it can be): writes into its attribute tensors (an optimizer's state) would be applied
    a second time by any re-run, eager or compiled; a graph whose only effect is writing into
    its inputs has no output to compare."""
    try:
        ops = _collectives(gm)
    except Exception as e:  # an odd graph: read as one that issues none outside a job
        ops, untold = [], _untold(e)
        if untold:
            return untold
    if ops:
        return talks(ops)
    if mutated.attributes:
        return ("not compared: the graph writes in place into tensors of the program it holds "
                f"as attributes ({_listed(mutated.attributes)}; an optimizer step's state); "
                "running it again, eagerly or to time its kernels, would apply those writes a "
                "second time to the program's own tensors")
    outputs = [n for n in getattr(getattr(gm, "graph", None), "nodes", []) if n.op == "output"]
    returns = outputs[0].args[0] if outputs and outputs[0].args else None
    if mutated.inputs and not (returns if isinstance(returns, (list, tuple)) else [returns]
                               if returns is not None else []):
        return ("not compared: the graph returns nothing; its effect is writing in place into "
                f"its inputs ({_listed(mutated.inputs)}), which the check does not compare")
    return ""


def checked(compiled: Callable[..., Any], eager: Callable[..., Any],
            record: Callable[[dict[str, Any]], None],
            time_kernels: Callable[[Callable[[], Any], Callable[[], None]], None] | None = None,
            *, tol: float | None = None, same_random: bool = False,
            profile: Callable[[Callable[[], Any], list[Any], GradCall | None,
                               Callable[[], None]], None] | None = None,
            localize: Callable[[Callable[[], Any], Callable[[], None]], dict[str, Any]] | None
            = None, localize_always: bool = False,
            wrote: Callable[[list[tuple[str, Any]]], None] | None = None,
            issues: Callable[[], bool] | None = None) -> Callable[..., Any]:
    """Wrap ``compiled`` so that its first call is also run eagerly and the two judged.

    ``eager`` is the FX graph that was compiled; ``tol`` the judge's tolerance (None: each
    dtype's default); ``same_random``: Inductor's ``fallback_random`` was on, so compiled and
    eager draw the same random numbers from the same seed. ``time_kernels``, when given, is
    called after the comparison with a function that runs the compiled graph again (to time its
    kernels); a failure there never reaches the user's call. ``profile``, when given, is called
    after that with the same function, the inputs (the eager run's copies) and, when the call
    ran under autograd, a ``GradCall`` (to profile the backward too), to profile both the
    compiled and the eager graph. ``localize``, when given, is called on a mismatch with a
    function that runs the compiled graph once more on copies of the inputs (forward, and
    backward when the call ran under autograd) and one that puts the RNG state it started from
    back; what it returns is the verdict's ``numerics``
    (the first diverging kernel); ``localize_always``: on every first call, a match or not
    compared (a graph drawing random numbers: its kernels are then classified, not judged).
    ``wrote``, when given, is told at the first call the tensors of the call the graph writes
    in place, named (``mutations.written_tensors``: what a re-run of the user's call must put
    back). ``issues``, when given, tells at the first call whether the compiled graph issues
    collectives (its post-grad graph, where a distributed tensor's are seen): then, as for a
    graph whose own nodes or inputs show them, nothing runs it again."""
    state = {"done": False}
    boxed = compat.is_boxed_call(compiled)
    try:
        random = random_ops(eager)
    except Exception:  # an odd graph: judge it as one without random ops
        random = []
    names = gradients.graph_names(eager)  # now: Dynamo drops its input sources once compiled
    try:
        mutated = mutations.mutated_state(eager)  # one walk: inputs and attributes written
    except Exception:  # an odd graph: judged as one that writes into nothing it did not make
        mutated = mutations.MutatedState([], [])
    written = mutated.positions
    not_compared = _why_not_compared(mutated, eager)

    def run(*args: Any) -> Any:
        if state["done"]:
            return compiled(*args)
        as_list = boxed and len(args) == 1 and isinstance(args[0], list)
        flat = list(args[0]) if as_list else list(args)  # a boxed callee clears its list
        if wrote is not None and not compat.has_fake_tensor(flat):
            try:
                wrote(mutations.written_tensors(eager, flat, written, mutated.targets,
                                                names.inputs))
            except Exception:  # what re-runs must put back: never the user's call's failure
                pass
        why = not_compared or _talks_at_call(flat, issues)
        if why:  # run once, as the program asked: nothing may run it again
            state["done"] = True
            t0 = time.perf_counter()
            out = compiled(*args)
            record({"skipped": why, "first_call_s": time.perf_counter() - t0,
                    "mutated": mutated.attributes + mutated.inputs})
            return out
        if compat.has_fake_tensor(flat):  # DDPOptimizer propagates fake tensors through each
            return compiled(*args)  # bucket's piece as it compiles it: the real call is later
        state["done"] = True
        try:
            inputs = [_clone(a) for a in flat]
            # the inputs the graph advances in place (a static KV cache, its length), as the
            # user's call found them: every re-run below starts from them
            restore = restorer(inputs, written)
        except Exception as e:  # out of memory: the user's call runs as it asked, unchecked
            t0 = time.perf_counter()
            out = compiled(*args)
            said = (f"{e}; the check makes no such copy" if isinstance(e, WideCopy) else
                    f"copying its inputs to re-run it failed: {type(e).__name__}: "
                    f"{str(e).strip()[:300]}")
            record({"skipped": f"not compared: {said}", "first_call_s": time.perf_counter() - t0})
            return out
        grad = _grad_call(compiled, flat, as_list)
        rng = _rng_state()
        t0 = time.perf_counter()
        out = compiled(*args)
        compiled_s = time.perf_counter() - t0
        after = _rng_state()  # where the user's program goes on from
        result: dict[str, Any]
        if random and not same_random:
            result = {"skipped": "not compared: the graph draws random numbers "
                                 f"({', '.join(random)}); trace with --set fallback_random=True "
                                 "to compare", "random_ops": random, "first_call_s": compiled_s}
        else:
            try:
                _set_rng_state(rng)
                with torch.no_grad(), _quiet():
                    t1 = time.perf_counter()
                    ref = eager(*inputs)
                    eager_s = time.perf_counter() - t1
                if written:  # an output aliasing an input written in place: kept as it is now
                    ref = _snapshot(ref)
                    restore()
                result = compare(out, ref, eager, inputs, rng, random, tol, grad, names,
                                 restore=restore)
                result.update(first_call_s=compiled_s, eager_s=eager_s, tol=tol)
                if random:
                    result["random_ops"] = random
            except Exception as e:  # the eager re-run failing must not break the user's run
                result = {"skipped": f"eager re-run failed: {type(e).__name__}: {e}"}
            finally:
                _set_rng_state(after)
        if localize is not None and (result.get("close") is False or localize_always):
            restore()
            result["numerics"] = _localized(localize, compiled, inputs, as_list, grad, rng, after,
                                            result.get("close") is False, restore)
        record(result)
        if time_kernels is not None and ("skipped" not in result or random):
            try:
                _time_again(compiled, inputs, as_list, time_kernels, restore)
            except Exception:  # timing is a bonus: the user's call goes on
                pass
        if profile is not None and ("skipped" not in result or random):
            def profiled(again: Callable[[], Any], before: Callable[[], None]) -> None:
                profile(again, inputs, grad, before)
            try:
                _time_again(compiled, inputs, as_list, profiled, restore)
            except Exception:  # so is profiling
                pass
        return out

    compat.copy_calling_convention(compiled, run)
    return run
