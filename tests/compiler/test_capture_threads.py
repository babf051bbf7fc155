"""What a capture does to the user's calls of compiled callables, per thread (one tiny module
and one tiny function compiled once, in this process): the whole call's timed calls run bare
on the timing thread only; another thread calling a compiled module or graph meanwhile is
traced as ever; the watch is the capture's one patch of torch, put back however the capture
ends; a listener done with a callable costs its calls nothing more until woken."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture import capture
from tuidebug.compiler.capture.compiled_calls import CompiledCall, CompiledCalls

pytestmark = pytest.mark.slow  # compiles in this process


class Tiny(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2


def body(x: torch.Tensor) -> torch.Tensor:
    return x.sin() + 1


def test_bare_calls_are_the_timing_threads_alone(tmp_path: Path) -> None:
    cls = compat.optimized_module_class()
    assert cls is not None
    torchs = cls.__dict__["__call__"]
    x = torch.randn(2, 4)
    heard: list[tuple[str, Any]] = []
    with capture(tmp_path / "t") as s:
        m, f = torch.compile(Tiny()), torch.compile(body)
        m(x), f(x)  # compiled and checked
        assert len(s.graphs) == 2, sorted(s.graphs)
        calls = s.concern(CompiledCalls)

        def listener(call: CompiledCall) -> bool:
            heard.append((threading.current_thread().name, call.compiled))
            return False  # every call
        calls.listen("the test's calls", listener)
        seen: dict[str, Any] = {}
        go = threading.Event()

        def other() -> None:
            go.wait(60)
            tls = s.tls
            w0, g0 = tls.watched_calls, tls.wrapped_calls
            m(x), f(x)
            seen.update(watched=tls.watched_calls - w0, wrapped=tls.wrapped_calls - g0,
                        bare=tls.bare)
        t = threading.Thread(target=other, name="other")
        t.start()
        tls = s.tls
        w0, g0 = tls.watched_calls, tls.wrapped_calls
        with s.bare():
            m(x), f(x)  # this thread's: as untraced
            go.set()  # the other thread's calls, made while this one is bare
            t.join(120)
            assert not t.is_alive()
            m(x)
            # the one patch stays the capture's while the calls are bare: no swap of the class
            assert cls.__dict__["__call__"] is not torchs
        assert (tls.watched_calls - w0, tls.wrapped_calls - g0) == (0, 0)
        # the other thread's: watched (the module), through the capture's graph wrappers
        # (the module's graph and the function's), told to the listeners
        assert seen == {"watched": 1, "wrapped": 2, "bare": False}, seen
        assert [name for name, _ in heard] == ["other", "other"], heard
        assert heard[0][1] is m
        heard.clear()
        m(x)  # after the block, this thread is watched again
        assert tls.watched_calls - w0 == 1 and tls.wrapped_calls - g0 == 1
        assert [name for name, _ in heard] == ["MainThread"], heard
        # torch's own __call__, for the timed calls: no frame of the capture's
        direct = calls.unwatched(m)
        assert torch.equal(direct(x), m(x)) and calls.unwatched(f) is f
        # the flag is put back when the block fails
        with pytest.raises(RuntimeError, match="in the block"):
            with s.bare():
                raise RuntimeError("in the block")
        assert tls.bare is False
    assert cls.__dict__["__call__"] is torchs  # put back when the capture stopped


def test_a_listener_done_with_a_callable_is_not_told_until_woken(tmp_path: Path) -> None:
    """The per-call path: once every listener is done with a compiled callable, its calls
    make no ``CompiledCall`` and run no listener; ``wake`` (a checked graph's outputs waiting
    for the call that returns them) tells them again."""
    x = torch.randn(2, 4)
    told: list[Any] = []
    with capture(tmp_path / "t") as s:
        calls = s.concern(CompiledCalls)

        def listener(call: CompiledCall) -> bool:
            told.append(call.compiled)
            return True  # done with it
        calls.listen("the test's calls", listener)
        m = torch.compile(Tiny())
        m(x)  # compiled and checked: the eager check's listener names its output, then done
        n = len(told)
        assert n >= 1
        for _ in range(3):
            m(x)
        assert len(told) == n, "told again after every listener was done"
        calls.wake()
        m(x)
        m(x)
        assert len(told) == n + 1


def _scalar(x: torch.Tensor) -> torch.Tensor:
    return x * x.sum().item()  # a graph break unless capture_scalar_outputs


def test_a_set_flag_reaches_every_thread_that_compiles(tmp_path: Path) -> None:
    """A --set of a Dynamo flag (capture_scalar_outputs: ``.item()`` in the graph, no break)
    is in force in each thread that compiles, not only the one that first reached the
    compiler: torch's config is per thread (2.13 on). Before, a later thread traced with the
    defaults (the changes reached it at Inductor's compile_fx only, after Dynamo), and a
    thread given a dead thread's ident (Python reuses them) was taken for it: its changes
    counted as made, none made. Each thread's own function (Dynamo's cache is per code)."""
    import torch._dynamo.config as dynamo_config

    def compiled_in_a_thread(ident: int | None = None) -> tuple[int, int, bool]:
        """(the thread's ident, the graphs its compile made, the flag as it saw it) — for a
        thread of ident ``ident``, else (ident, -1, False) without compiling."""
        got: list[tuple[int, int, bool]] = []

        def run() -> None:
            me = threading.get_ident()
            if ident is not None and me != ident:
                got.append((me, -1, False))
                return
            graphs: list[Any] = []

            def backend(gm: Any, example_inputs: Any) -> Any:
                graphs.append(gm)
                return gm.forward
            # a code of its own: compiled anew, not found in another thread's cache
            code = _scalar.__code__.replace(co_name=f"scalar_{len(seen)}")
            fn = type(_scalar)(code, _scalar.__globals__)
            torch.compile(fn, backend=backend)(torch.ones(3))
            got.append((me, len(graphs), bool(dynamo_config.capture_scalar_outputs)))
        t = threading.Thread(target=run)
        t.start()
        t.join(300)
        assert not t.is_alive() and got
        return got[0]

    assert compat.config_per_thread(dynamo_config)  # torch 2.13's config (the pin)
    torch._dynamo.reset()
    seen: list[tuple[int, int, bool]] = []
    with capture(tmp_path / "t", check_accuracy=False) as s:
        s.set_config({"dynamo.capture_scalar_outputs": True})  # as `trace --set` does
        seen.append(compiled_in_a_thread())
        first = seen[0][0]
        for _ in range(50):  # a thread that Python gives the ended one's ident
            if (again := compiled_in_a_thread(first))[1] >= 0:
                seen.append(again)
                break
        else:
            pytest.skip("Python reused no thread ident in 50 threads")
    assert seen == [(first, 1, True), (first, 1, True)], seen
