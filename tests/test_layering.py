"""The layering of docs/architecture.md, checked three ways: import-linter's contracts (in
pyproject.toml), what a real process has in ``sys.modules`` after importing the torch-free layers
and reading a trace, and a scan of the sources for private torch modules outside compat.py."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from tests.conftest import ROOT

PACKAGE = ROOT / "tuidebug"
# A real trace in the repository (captured on a GPU): reading it needs no compiler.
FIXTURE_TRACE = ROOT / "tests" / "fixtures" / "cuda_mlp_autotune"


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _modules(*packages: str) -> list[str]:
    """Every module of ``tuidebug.<package>``, by its file."""
    out = []
    for package in packages:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


# -- import-linter ----------------------------------------------------------------------------------

def test_import_linter_contracts_are_kept() -> None:
    exe = Path(sys.executable).parent / "lint-imports"
    command = [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]
    proc = subprocess.run([*command, "--no-cache"], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    m = re.search(r"Contracts: (\d+) kept, 0 broken", proc.stdout)
    assert m and int(m.group(1)) >= 5, proc.stdout[-2000:]
    for name in ("layers: trace -> viewers -> compiler -> minify -> tui -> cli",
                 "trace and viewers never import torch or textual", "tui never imports torch",
                 "nothing imports the CLI"):
        assert name in proc.stdout, name


# -- at run time ----------------------------------------------------------------------------------

def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=300)


READ_TRACE = f"""
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import trace_summary
import io
from rich.console import Console
from tuidebug.viewers.info import render_summary
trace = Trace({str(FIXTURE_TRACE)!r})
assert trace.graphs
for g in trace.graphs:
    assert [g.stage_graph(s) for s in g.snapshots()]
    g.kernels, g.ir_pre, g.ir_post, g.fusion, g.provenance, g.autotune, g.wrapper_code()
    g.check_files()
render_summary(trace_summary(trace), Console(file=io.StringIO()))
"""

LOADED = """
bad = sorted(m for m in sys.modules if m.split(".")[0] in {forbidden!r})
assert not bad, bad
print("checked", len(modules))
"""


def test_trace_and_viewers_load_neither_torch_nor_textual() -> None:
    modules = _modules("trace", "viewers")
    assert len(modules) >= 20
    code = (f"import importlib, sys\nmodules = {modules!r}\n"
            "for m in modules:\n    importlib.import_module(m)\n"
            + READ_TRACE + LOADED.format(forbidden={"torch", "textual"}))
    proc = _run(code)
    assert proc.returncode == 0 and "checked" in proc.stdout, proc.stderr[-3000:]


def test_the_tui_loads_no_torch() -> None:
    modules = _modules("trace", "viewers", "tui")
    assert any(m.startswith("tuidebug.tui.screens.") for m in modules)
    code = (f"import importlib, sys\nmodules = {modules!r}\n"
            "for m in modules:\n    importlib.import_module(m)\n"
            + READ_TRACE
            + "from tuidebug.tui.app import TuidebugApp\nTuidebugApp(trace)\n"
            + LOADED.format(forbidden={"torch"}))
    proc = _run(code)
    assert proc.returncode == 0 and "checked" in proc.stdout, proc.stderr[-3000:]


# -- private torch APIs only in compat ------------------------------------------------------------

COMPAT = "tuidebug/compiler/compat"  # compat.py, or the package compat/


def _in_compat(rel: str) -> bool:
    return rel == COMPAT + ".py" or rel.startswith(COMPAT + "/")
# Files allowed to name private torch modules outside compat.py while a move into compat.py is under
# way (issue 13 moved the last ones, minify/worker.py's). Keep it empty: a listed file that no
# longer names one fails the test, as does any file not listed that does.
KNOWN_EXCEPTIONS: set[str] = set()
# torch._x, torch._x.y…, torch.fx.experimental…; not dunders such as torch.__version__
PRIVATE = re.compile(r"torch\.(_(?!_)\w*|fx\.experimental)(\.\w+)*")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            out.add(id(body[0].value))
    return out


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def private_torch_names(source: str) -> list[tuple[int, str]]:
    """Private torch modules a source uses: imports, ``torch._x`` attribute chains, and strings
    that are exactly such a dotted name (``import_module("torch._inductor")``); docstrings and
    prose that mention one are not uses."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Attribute):
            names = [d] if (d := _dotted(node)) else []
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            names = [node.value.strip()]
        hits += [(node.lineno, n) for n in names if PRIVATE.fullmatch(n)]
    return sorted(set(hits))


def test_the_scan_finds_each_kind_of_use() -> None:
    source = ('"""Docs may say torch._inductor."""\nimport torch._dynamo\n'
              "from torch._inductor import config\nfrom torch.fx.experimental import proxy_tensor\n"
              "import importlib\nx = importlib.import_module('torch._functorch')\n"
              "y = torch._subclasses.FakeTensorMode\nv = torch.__version__\n"
              "help = 'runs torch._inductor.compiler_bisector in a child'\n")
    found = {n for _, n in private_torch_names(source)}
    assert found == {"torch._dynamo", "torch._inductor", "torch._inductor.config",
                     "torch.fx.experimental", "torch.fx.experimental.proxy_tensor",
                     "torch._functorch", "torch._subclasses.FakeTensorMode", "torch._subclasses"}


def test_private_torch_modules_are_named_only_in_compat() -> None:
    """Everywhere but tuidebug/compiler/compat(.py or /): imports, attribute chains, module names."""
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if _in_compat(rel):
            continue
        hits = private_torch_names(path.read_text(encoding="utf-8"))
        if hits and rel not in KNOWN_EXCEPTIONS:
            offenders[rel] = hits[:5]
    assert not offenders, f"private torch APIs outside {COMPAT}: {offenders}"
    compat = [p for p in PACKAGE.rglob("*.py") if _in_compat(p.relative_to(ROOT).as_posix())]
    assert any(private_torch_names(p.read_text(encoding="utf-8")) for p in compat)  # seen there
    stale = {f for f in KNOWN_EXCEPTIONS
             if not (ROOT / f).exists() or not private_torch_names((ROOT / f).read_text())}
    assert not stale, f"moved into compat: remove {stale} from KNOWN_EXCEPTIONS"


# A tensor's private attributes (torch's own, undocumented): read only in compat, as modules are
PRIVATE_TENSOR_ATTRS = frozenset({"_version", "_cdata", "_base", "_typed_storage", "_is_view",
                                  "_grad_fn", "_backward_hooks", "_use_count"})


def private_tensor_attributes(source: str) -> list[tuple[int, str]]:
    """Uses of a tensor's private attributes (``t._version``) in a source."""
    return sorted({(node.lineno, node.attr) for node in ast.walk(ast.parse(source))
                   if isinstance(node, ast.Attribute) and node.attr in PRIVATE_TENSOR_ATTRS})


def _outside_compat(paths: list[Path], scan: Callable[[str], list[tuple[int, str]]]
                    ) -> tuple[dict[str, list[tuple[int, str]]], int]:
    """What ``scan`` finds in each of ``paths`` outside compat (its first five, per file), and
    how many files were scanned."""
    offenders, scanned = {}, 0
    for path in paths:
        rel = path.relative_to(ROOT).as_posix()
        if _in_compat(rel):
            continue
        scanned += 1
        hits = scan(path.read_text(encoding="utf-8"))
        if hits:
            offenders[rel] = hits[:5]
    return offenders, scanned


def test_private_tensor_attributes_are_read_only_in_compat() -> None:
    """``t._version`` (the whole call's put-back read it in capture/call_state.py) goes through
    ``compat.version_counter``, feature-detected."""
    assert private_tensor_attributes("v = t._version\nok = t.version\n") == [(1, "_version")]
    offenders, scanned = _outside_compat(sorted(PACKAGE.rglob("*.py")), private_tensor_attributes)
    assert scanned > 100
    assert not offenders, f"private tensor attributes outside {COMPAT}: {offenders}"


# Torch-internal names matched as text (Dynamo's source names, AOTAutograd's autograd function):
# a protocol as private as an import. In the layers that run torch (compiler, minify) they are
# read only in compat; the trace layer reads them from logs, as data, and is not scanned.
INTERNAL_NAMES = ("L['", "G['", "._modules[", "._parameters[", "._buffers[", "CompiledFunction")


def internal_name_strings(source: str) -> list[tuple[int, str]]:
    """String constants (not docstrings) that contain a torch-internal name (``INTERNAL_NAMES``)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return sorted({(node.lineno, name) for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and isinstance(node.value, str)
                   and id(node) not in docs for name in INTERNAL_NAMES if name in node.value})


def test_torch_internal_names_are_matched_only_in_compat() -> None:
    sample = '"""L[\'x\'] in a docstring"""\nok = "L[\'x\']._modules[\'a\']"\n'
    assert internal_name_strings(sample) == [(2, "._modules["), (2, "L['")]
    paths = [p for layer in ("compiler", "minify") for p in sorted((PACKAGE / layer).rglob("*.py"))
             if p.name != "repro_template.py"]  # the repro's own code
    offenders, scanned = _outside_compat(paths, internal_name_strings)
    assert scanned > 20
    assert not offenders, f"torch-internal names matched outside {COMPAT}: {offenders}"


def test_nothing_outside_the_cli_imports_it() -> None:
    """Also for modules no contract names yet (a new top-level module, tuidebug/proc.py …).
    ``python -m tuidebug`` (tuidebug/__main__.py) is an entry point, as the console script is."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "cli") in path.parents or path == PACKAGE / "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) else [])
            if any(n == "tuidebug.cli" or n.startswith("tuidebug.cli.") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders


def test_no_module_is_loaded_by_name() -> None:
    """``__import__``/``importlib.import_module`` (which skipped a missing module silently in the
    CLI and the TUI) only in compat, where a torch internal is looked up by its dotted name."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if _in_compat(rel):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and (_dotted(node.func) or "").rsplit(".", 1)[-1] in (
                    "__import__", "import_module"):
                offenders.append(f"{rel}:{node.lineno}")
    assert not offenders, offenders


# -- every import of our own names a module that exists ----------------------------------------------

def _own_module_exists(name: str) -> bool:
    """``tuidebug.a.b`` is ``tuidebug/a/b.py`` or ``tuidebug/a/b/__init__.py``."""
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def stale_imports(source: str) -> list[tuple[int, str]]:
    """Imports of ``tuidebug.…`` modules that do not exist (a module moved, an import left on
    its old path: inside a function it fails only when that function runs)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from tuidebug.a import b`: tuidebug.a exists (b may be a module or a name in it)
            names = [node.module]
        else:
            continue
        out += [(node.lineno, n) for n in names
                if n.split(".")[0] == "tuidebug" and not _own_module_exists(n)]
    return out


def test_the_stale_import_scan_finds_one() -> None:
    code = ("import tuidebug.errors\nfrom tuidebug.inert import inert\n"
            "def f():\n    from tuidebug.viewers.inert import inert\n")
    assert stale_imports(code) == [(4, "tuidebug.viewers.inert")]


def test_every_import_of_our_own_modules_resolves() -> None:
    files = sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py"))
    assert len(files) > 200
    stale = [f"{p.relative_to(ROOT)}:{line} {name}" for p in files
             for line, name in stale_imports(p.read_text(encoding="utf-8"))]
    assert stale == [], stale


_MACHINE_CALLS = {"os.cpu_count", "os.getloadavg", "os.sched_getaffinity",
                  "multiprocessing.cpu_count"}


def test_cores_and_load_are_counted_only_in_machine() -> None:
    """tuidebug/machine.py is the one place the package, its tests and its benches count cores
    and read the load (affinity, not the machine's count; one fallback); a call elsewhere is a
    second way (bench/snapshot_read.py and import_torch_trace.py read os.getloadavg)."""
    found, scanned = [], 0
    for top in ("tuidebug", "tests", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel == "tuidebug/machine.py":
                continue
            scanned += 1
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and _dotted(node.func) in _MACHINE_CALLS:
                    found.append(f"{rel}:{node.lineno} {_dotted(node.func)}")
    assert scanned > 300, scanned
    assert not found, found
