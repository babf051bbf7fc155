"""Compare a compiled graph against eager on the same inputs (max abs / rel error per output)."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch


def _clone(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    return x


def _flatten(out: Any) -> list[Any]:
    if isinstance(out, (list, tuple)):
        return [y for x in out for y in _flatten(x)]
    return [out]


def compare_outputs(actual: Any, expected: Any) -> dict[str, Any]:
    """Per-output max absolute and relative error, computed in float64 where possible."""
    outs = []
    a_list, e_list = _flatten(actual), _flatten(expected)
    worst_abs = worst_rel = 0.0
    for i, (a, e) in enumerate(zip(a_list, e_list)):
        if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor)):
            continue
        entry: dict[str, Any] = {"index": i, "shape": list(a.shape),
                                 "dtype": str(a.dtype).replace("torch.", "")}
        if a.shape != e.shape:
            entry["error"] = f"shape mismatch: compiled {list(a.shape)} vs eager {list(e.shape)}"
            worst_abs = worst_rel = float("inf")
        elif a.numel() == 0:
            entry["max_abs"] = entry["max_rel"] = 0.0
        else:
            try:
                af = a.detach().to("cpu", torch.float64)
                ef = e.detach().to("cpu", torch.float64)
            except (RuntimeError, TypeError):
                af, ef = a.detach().float().cpu(), e.detach().float().cpu()
            diff = (af - ef).abs()
            nan_mismatch = bool((af.isnan() != ef.isnan()).any())
            diff = torch.where(af.isnan() & ef.isnan(), torch.zeros_like(diff), diff)
            max_abs = float("inf") if nan_mismatch else float(diff.max())
            rel = diff / ef.abs().clamp_min(1e-12)
            max_rel = float("inf") if nan_mismatch else float(rel.max())
            entry["max_abs"], entry["max_rel"] = max_abs, max_rel
            worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
        outs.append(entry)
    return {"outputs": outs, "max_abs": worst_abs, "max_rel": worst_rel}


LOW_PRECISION = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"}


def is_close(result: dict[str, Any], atol: float = 1e-3, rtol: float = 1e-3) -> bool:
    """True when every output is within tolerance (looser for 16-bit and 8-bit floats)."""
    for o in result.get("outputs", []):
        if "error" in o:
            return False
        scale = 10.0 if o.get("dtype") in LOW_PRECISION else 1.0
        if o["max_abs"] > atol * scale and o["max_rel"] > rtol * scale:
            return False
    return True


def _rng_state() -> tuple[Any, Any]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple[Any, Any]) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state_all(state[1])


def _time_again(compiled: Callable[..., Any], inputs: list[Any], as_list: bool,
                time_kernels: Callable[[Callable[[], Any]], None]) -> None:
    """Hand ``time_kernels`` a function that runs ``compiled`` once more on ``inputs`` (the
    eager run's copies; the user's tensors are not touched); the RNG state is put back after."""
    def again() -> Any:
        with torch.no_grad():
            return compiled(list(inputs)) if as_list else compiled(*inputs)

    state = _rng_state()
    try:
        time_kernels(again)
    finally:
        _set_rng_state(state)


def checked(compiled: Callable[..., Any], eager: Callable[..., Any],
            record: Callable[[dict[str, Any]], None],
            time_kernels: Callable[[Callable[[], Any]], None] | None = None) -> Callable[..., Any]:
    """Wrap ``compiled`` so that its first call is also run eagerly and the two compared.

    ``time_kernels``, when given, is called after the comparison with a function that runs the
    compiled graph again (to time its kernels); a failure there never reaches the user's call."""
    state = {"done": False}
    boxed = bool(getattr(compiled, "_boxed_call", False))

    def run(*args: Any) -> Any:
        if state["done"]:
            return compiled(*args)
        state["done"] = True
        as_list = boxed and len(args) == 1 and isinstance(args[0], list)
        flat = list(args[0]) if as_list else list(args)  # a boxed callee clears its list
        inputs = [_clone(a) for a in flat]
        rng = _rng_state()
        t0 = time.perf_counter()
        out = compiled(*args)
        compiled_s = time.perf_counter() - t0
        try:
            _set_rng_state(rng)
            with torch.no_grad():
                t1 = time.perf_counter()
                ref = eager(*inputs)
                eager_s = time.perf_counter() - t1
            result = compare_outputs(out, ref)
            result.update(first_call_s=compiled_s, eager_s=eager_s)
            result["close"] = is_close(result)
        except Exception as e:  # the eager re-run itself failing must not break the user's run
            result = {"skipped": f"eager re-run failed: {type(e).__name__}: {e}"}
        record(result)
        if time_kernels is not None and "skipped" not in result:
            try:
                _time_again(compiled, inputs, as_list, time_kernels)
            except Exception:  # timing is a bonus: the user's call goes on
                pass
        return out

    if boxed:
        run._boxed_call = True  # type: ignore[attr-defined]
    return run
