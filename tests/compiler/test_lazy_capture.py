"""Capture hooks Dynamo and Inductor only when the script first reaches them: a traced script
that never compiles loads no more of torch than untraced; one that reaches the compiler its own
way (its own config flags first, torch._dynamo.optimize at import time, a --set) is traced as
before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tuidebug.trace.format.reader import Trace

_ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}

# prints the compiler's modules loaded when the script ends (torch and triton)
_NO_COMPILE = """
import json, sys, torch
x = torch.ones(3) * 2
print("MODULES", json.dumps(sorted(m for m in sys.modules
                                   if m.split(".")[0] in ("torch", "triton"))))
"""


def _modules(stdout: str) -> set[str]:
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith("MODULES ")]
    return set(json.loads(line[len("MODULES "):]))


@pytest.mark.slow
def test_a_script_that_never_compiles_loads_no_more_of_torch(tmp_path: Path) -> None:
    """Under ``tuidebug trace`` the script's torch modules are those it loads untraced: no
    torch._dynamo, no torch._inductor, no triton (capture used to import Inductor at start,
    seconds of CPU a script that never compiles paid)."""
    script = tmp_path / "no_compile.py"
    script.write_text(_NO_COMPILE)
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=_ENV, timeout=300)
    assert plain.returncode == 0, plain.stderr
    traced = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o",
                             str(tmp_path / "t"), str(script)], capture_output=True, text=True,
                            cwd=ROOT, env=_ENV, timeout=300)
    assert traced.returncode == 0, traced.stderr
    loaded, untraced = _modules(traced.stdout), _modules(plain.stdout)
    assert "torch" in loaded
    assert not {m for m in loaded if m.startswith(("torch._dynamo", "torch._inductor"))}
    assert loaded == untraced, sorted(loaded ^ untraced)
    t = Trace(tmp_path / "t")
    assert t.status == "ok" and not t.graphs
    assert any("nothing was compiled" in w for w in t.manifest.warnings)
    assert t.manifest.tuidebug_config["fx_graph_cache"] is False  # recorded all the same


# reaches the compiler its own way: Inductor's config imported and set first (a flag tuidebug
# also sets among them), torch._dynamo.optimize applied at import time
_OWN_WAY = """
import torch
import torch._dynamo
import torch._inductor.config as config

config.max_fusion_size = 32
config.fx_graph_cache = True  # the script's own setting wins over the capture's, as before

@torch._dynamo.optimize("inductor")
def f(x):
    return torch.relu(x) * 2 + x.sum()

print(f(torch.randn(16)).sum())
"""


@pytest.mark.slow
def test_a_script_reaching_the_compiler_its_own_way(tmp_path: Path) -> None:
    """The capture's config (provenance on), the caches it turns off, and a ``--set`` are in
    force for the first compile, with the script's own flags set over them; Dynamo's and
    Inductor's hooks record the compile that torch._dynamo.optimize started."""
    script = tmp_path / "own_way.py"
    script.write_text(_OWN_WAY)
    out = tmp_path / "t"
    env = dict(_ENV, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out),
                        "--set", "split_reductions=False", str(script)],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    t = Trace(out)
    assert t.status == "ok", t.error
    (g,) = t.graphs
    assert g.kind == "inference" and g.status == "ok" and g.kernels
    assert {s.name for s in g.stages} >= {"dynamo", "pre_grad", "post_grad"}, g.stages
    kernels = g.provenance["kernels"]  # tuidebug's provenance level was in force
    assert kernels and all(k["fx_nodes"] for k in kernels.values()), kernels
    config = json.loads((out / "config.json").read_text())
    values, changed = config["values"], config["changed"]
    assert values["max_fusion_size"] == 32 and values["fx_graph_cache"] is True
    assert values["split_reductions"] is False  # the --set
    assert values["trace.provenance_tracking_level"] == 1
    assert "trace.provenance_tracking_level" in config["set_by_tuidebug"], changed
    compile_ = t.compiles[g.compile_id]
    assert compile_.get("guards"), compile_  # Dynamo's structured events heard
    # what the capture found missing is truly missing in this torch (torch 2.11 has no
    # CatchErrorsWrapper._handle_skip): hooks installed late must find what exists
    for entry in t.manifest.not_available:
        assert not _resolves(entry.split(" is not available")[0]), entry



def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` (``pkg.module.Class.attr``) names something in this torch."""
    import importlib
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False

def test_a_hook_runs_when_its_module_is_imported(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``after_import``: the hook runs once the module's code has run and before the import
    statement returns (what it sets is what the importer binds); a module already loaded runs
    it at once; a cancelled hook never runs; the finder leaves ``sys.meta_path`` when no hook
    waits."""
    from tuidebug.compiler.compat.after_import import _FINDER, after_import

    (tmp_path / "lazy_probe_mod.py").write_text("VALUE = 1\n")
    (tmp_path / "lazy_probe_other.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[str] = []

    def hook(module: object) -> None:
        seen.append(module.__name__)  # type: ignore[attr-defined]
        module.VALUE = 2  # type: ignore[attr-defined]

    cancel_other = after_import("lazy_probe_other", lambda m: seen.append("other"))
    after_import("lazy_probe_mod", hook)
    assert _FINDER in sys.meta_path and not seen
    cancel_other()
    from lazy_probe_mod import VALUE  # type: ignore[import-not-found]

    assert VALUE == 2 and seen == ["lazy_probe_mod"]
    assert _FINDER not in sys.meta_path
    import lazy_probe_other  # type: ignore[import-not-found]  # noqa: F401

    assert seen == ["lazy_probe_mod"]
    after_import("lazy_probe_mod", hook)  # loaded: at once
    assert seen == ["lazy_probe_mod", "lazy_probe_mod"]
    for name in ("lazy_probe_mod", "lazy_probe_other"):
        sys.modules.pop(name, None)
