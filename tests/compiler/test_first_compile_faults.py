"""What capture's first-compile trigger does when something goes wrong (in this process, tiny
functions, backend="eager"/"aot_eager"): the user's compile goes on as it would untraced, and the
trace says what capture could not do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture import capture
from tuidebug.trace.format.reader import Trace

pytestmark = pytest.mark.slow  # compiles in this process


def test_a_failing_compiler_import_never_breaks_the_users_compile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor failing to import (fault injected in capture's own import step) at the first
    torch.compile: a backend="eager" compile runs as untraced (it raised ImportError from
    torch.compile before), and the trace warns that capture could not hook the compiler."""
    def fails() -> None:
        raise ImportError("simulated: an Inductor module fails to import")

    monkeypatch.setattr(compat, "import_inductor", fails)
    torch._dynamo.reset()
    with capture(tmp_path / "t", check_accuracy=False):
        g = torch.compile(lambda x: x * 2, backend="eager")
        out = g(torch.ones(2))
    assert out.tolist() == [2.0, 2.0]
    warnings = Trace(tmp_path / "t").manifest.warnings
    assert any("failed to import" in w and "simulated" in w for w in warnings), warnings


def _config_now() -> tuple[object, object]:
    import torch._inductor.config as c
    return (c.fx_graph_cache, c.trace.provenance_tracking_level)


def test_config_reaches_the_thread_that_first_compiles(tmp_path: Path) -> None:
    """The first torch.compile on a long-lived worker thread (the config modules loaded, and
    set, in the starting thread before; Dynamo loaded, so the compiler is hooked at the start):
    the worker's Inductor compile runs with the capture's config (caches off, provenance on; it
    had the defaults before), the starting thread's values are put back,
    and where torch's config is per thread the worker's, which only it can put back, are said in
    a warning."""
    import queue
    import threading

    import torch._inductor.config as c

    jobs: queue.Queue[Any] = queue.Queue()
    res: queue.Queue[Any] = queue.Queue()

    def worker() -> None:
        while (fn := jobs.get()) is not None:
            res.put(fn())

    def on_worker(fn: Any) -> Any:
        jobs.put(fn)
        return res.get(timeout=300)

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    torch._dynamo.reset()
    before = _config_now()
    try:
        with capture(tmp_path / "t", check_accuracy=False):
            on_worker(lambda: torch.compile(lambda x: x + 1)(torch.ones(2)))
            inside = on_worker(_config_now)
        after_main = _config_now()
    finally:
        jobs.put(None)
        thread.join(timeout=60)
    assert inside == (False, 1)
    assert after_main == before
    warnings = Trace(tmp_path / "t").manifest.warnings
    left = [w for w in warnings if "stay in force in 1 other thread" in w]
    assert bool(left) == compat.config_per_thread(c), warnings


def _run_with_sets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   overrides: dict[Any, Any]) -> tuple[int, bool]:
    """A script that marks that it ran, run by run_script in a capture (trace ``t``) with the
    ``--set`` flags ``overrides``: (the exit code, whether the script ran)."""
    from tuidebug.compiler.capture import CaptureSession
    from tuidebug.compiler.run_script import run_in_session

    ran = tmp_path / "ran"
    script = tmp_path / "s.py"
    script.write_text(f"open({str(ran)!r}, 'w').close()\n")
    monkeypatch.setattr("sys.argv", list(__import__("sys").argv))
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    session = CaptureSession(tmp_path / "t", check_accuracy=False).start()
    code = run_in_session(session, str(script), [], overrides)
    return code, ran.exists()


def test_a_set_flag_this_torch_lacks_fails_before_the_script_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A --set of a flag this torch has not (beside one it has): the run fails before the
    script runs, saying which flag, and the manifest records no override. Before, every flag of
    that module was silently left unset (a trace warning) while the manifest recorded both, and
    the script ran."""
    code, ran = _run_with_sets(tmp_path, monkeypatch,
                               {"max_fusion_size": 8, "no_such_flag_in_any_torch": 1})
    assert code != 0
    assert not ran
    m = Trace(tmp_path / "t").manifest
    assert m.config_overrides == {}
    assert m.script_error is not None and "no_such_flag_in_any_torch" in m.script_error.message
    assert "max_fusion_size" not in m.script_error.message


def test_an_error_in_the_set_flags_lookup_still_finishes_the_trace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """compat.missing_flags raising (a broken Inductor install; here a real bad --set: a key
    that is not a name, on which the lookup itself raises AttributeError) before the script
    runs: the trace is finished, the error recorded as the run's, the script not run. Before,
    the lookup ran outside what finishes the trace: the manifest stayed 'running'."""
    from tuidebug.trace.format import schema

    with pytest.raises(AttributeError):  # the lookup does raise on it
        compat.missing_flags({1: True})
    code, ran = _run_with_sets(tmp_path, monkeypatch, {1: True})
    assert code != 0 and not ran
    m = Trace(tmp_path / "t").manifest
    assert m.status != schema.STATUS_RUNNING, m.status
    assert m.script_error is not None and m.script_error.type == "AttributeError", m.script_error
    assert m.config_overrides == {}


def _before(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) * 3


def test_a_non_inductor_compile_made_before_the_capture_is_hooked(tmp_path: Path) -> None:
    """``g = torch.compile(f, backend="aot_eager")`` before the capture, its first call inside:
    Dynamo is loaded, so the capture hooks the compiler at its start and records the frame
    (no graph for Inductor); before, nothing hooked it and the trace said, falsely, that it had
    been compiled before the capture started."""
    g = torch.compile(_before, backend="aot_eager")
    with capture(tmp_path / "t", check_accuracy=False):
        out = g(torch.ones(2))
    assert out.tolist() == [3.0, 3.0]
    t = Trace(tmp_path / "t")
    warnings = " ".join(t.manifest.warnings)
    assert "compiled before the capture started" not in warnings, warnings
    assert "a backend other than Inductor" in warnings, warnings
    assert t.compiles, "Dynamo's frame is recorded"


def test_a_trigger_kept_and_wrapped_later_does_not_recurse(tmp_path: Path) -> None:
    """A library keeps torch.compile (the trigger) before the first compile and later puts its
    own wrapper of it on torch.compile: a call ends at the original (it bounced between the two
    until RecursionError before). The wrapper runs twice: from the user's call, and from the
    trigger's call of the attribute (through what capture wrapped there), which then goes on
    to the original."""
    import torch._dynamo.eval_frame  # noqa: F401  (loaded: the capture hooks at its start)

    sys_modules = __import__("sys").modules
    dynamo = sys_modules.pop("torch._dynamo.eval_frame")  # as a fresh script: not loaded yet
    try:
        with capture(tmp_path / "t", check_accuracy=False):
            saved = torch.compile  # the trigger
            calls: list[int] = []

            def wrapper(*a: Any, **k: Any) -> Any:
                calls.append(1)
                return saved(*a, **k)

            sys_modules["torch._dynamo.eval_frame"] = dynamo
            torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))  # the first
            torch.compile = wrapper
            try:
                g = torch.compile(lambda x: x * 2, backend="eager")
            finally:
                torch.compile = saved
            assert g(torch.ones(2)).tolist() == [2.0, 2.0]
    finally:
        sys_modules["torch._dynamo.eval_frame"] = dynamo
    assert calls == [1, 1]
