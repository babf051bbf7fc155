"""Tests for the torch-free Inductor flag registry, against the installed torch's real config.py."""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tuidebug.cli.compiling import print_flags as flags_main
from tuidebug.compiler.flags import (
    FlagValueError,
    Registry,
    UnknownFlag,
    default_config_path,
    load_registry,
    values_in_force,
)

REPO = Path(__file__).resolve().parents[2]

# Public names that get_config_copy() reports but the registry deliberately leaves out.
NOT_FLAGS = {
    # config.py does `from typing import TYPE_CHECKING`; install_config_module turns every
    # module-level bool into a config entry, imported ones included, so this typing constant
    # shows up in get_config_copy(). It is not an Inductor option.
    "TYPE_CHECKING",
}


def _run_python(code: str, env: dict[str, str] | None = None) -> str:
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_registry()


@pytest.fixture(scope="module")
def real_config(registry: Registry) -> dict[str, dict[str, Any]]:
    """get_config_copy() of the real module, imported in a clean environment (no overrides)."""
    read_by_flags = {var for flag in registry for var in flag.env}
    env = {k: v for k, v in os.environ.items()
           if k not in read_by_flags and not k.startswith(("TORCH", "INDUCTOR", "AOT"))}
    out = _run_python(textwrap.dedent("""
        import json
        import torch._inductor.config as config
        copy = config.get_config_copy()
        print(json.dumps({k: {"repr": repr(v), "type": type(v).__name__} for k, v in copy.items()}))
    """), env)
    return json.loads(out)


# ---------------------------------------------------------------------------- contents


def test_registry_is_large(registry: Registry) -> None:
    assert len(registry.flags) >= 200
    assert Path(registry.path) == default_config_path().resolve()


@pytest.mark.parametrize("name", [
    "max_fusion_size", "triton.cudagraphs", "cpp.simdlen", "triton.autotune_at_compile_time",
    "size_asserts", "fx_graph_cache", "max_autotune_gemm_backends", "unroll_reductions_threshold",
    "pick_loop_orders", "fallback_random", "joint_graph_constant_folding", "force_disable_caches",
    "trace.enabled", "aot_inductor.debug_compile",
])
def test_known_flags_present(registry: Registry, name: str) -> None:
    flag = registry.get(name)
    assert flag.name == name and flag.line > 0


def test_max_fusion_size(registry: Registry) -> None:
    flag = registry.get("max_fusion_size")
    assert flag.type == "int"
    assert isinstance(flag.default, int) and flag.default_known
    assert "fusion" in flag.doc.lower()


def test_env_driven_bool(registry: Registry) -> None:
    flag = registry.get("triton.cudagraphs")
    assert flag.type == "bool"
    assert flag.default is None and not flag.default_known
    assert "os.environ.get(" in (flag.default_repr or "")
    assert "TORCHINDUCTOR_CUDAGRAPHS" in flag.env


def test_config_object_env_and_alias(registry: Registry) -> None:
    cache = registry.get("fx_graph_cache")
    assert cache.type == "bool" and cache.default is True
    assert "TORCHINDUCTOR_FX_GRAPH_CACHE" in cache.env
    alias = registry.get("force_disable_caches")
    assert alias.type == "bool"
    assert alias.default_repr == "alias of torch.compiler.config.force_disable_caches"


def test_env_read_through_helper_function(registry: Registry) -> None:
    # fx_graph_remote_cache = fx_graph_remote_cache_default(), which calls get_tristate_env(...)
    flag = registry.get("fx_graph_remote_cache")
    assert flag.env == ("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE",)
    assert flag.type == "bool | None"


def test_literal_choices(registry: Registry) -> None:
    literal = [f for f in registry if f.choices]
    assert len(literal) >= 5
    for flag in literal:
        assert flag.type.count("Literal[") >= 1
        if flag.default_known and not flag.type.startswith("list"):
            assert flag.default in flag.choices or flag.default is None, flag
    layout = registry.get("triton_kernel_default_layout_constraint")
    assert layout.choices == ("needs_fixed_stride_order", "flexible_layout")


def test_no_private_names(registry: Registry) -> None:
    assert not [n for n in registry.flags if any(p.startswith("_") for p in n.split("."))]


def test_explicit_path_matches_default(registry: Registry) -> None:
    again = load_registry(default_config_path())
    assert again is registry  # cached on path + mtime


# ---------------------------------------------------------------------------- cross-check


def test_every_real_public_flag_is_registered(registry: Registry, real_config: dict) -> None:
    public = {k for k in real_config if not any(p.startswith("_") for p in k.split("."))}
    missing = sorted(public - set(registry.flags) - NOT_FLAGS)
    assert not missing, f"registry lacks {missing}"
    assert NOT_FLAGS <= public, "an exception is no longer needed; drop it from NOT_FLAGS"


def test_defaults_match_real_module(registry: Registry, real_config: dict) -> None:
    simple = {"bool", "int", "float", "str", "NoneType"}
    checked = 0
    for flag in registry:
        real = real_config.get(flag.name)
        if real is None or real["type"] not in simple or not flag.default_known:
            continue
        assert repr(flag.default) == real["repr"], flag
        checked += 1
    assert checked >= 150
    for name in ("max_fusion_size", "unroll_reductions_threshold", "pick_loop_orders",
                 "fallback_random", "joint_graph_constant_folding"):
        assert repr(registry.get(name).default) == real_config[name]["repr"]


def test_registry_types_accept_real_defaults(registry: Registry, real_config: dict) -> None:
    """Every real default of a simple type must parse back through parse_value."""
    checked: dict[str, int] = {}
    for flag in registry:
        real = real_config.get(flag.name)
        if real is None or real["type"] not in {"bool", "int", "float", "str"}:
            continue
        value = ast.literal_eval(real["repr"])
        text = value if isinstance(value, str) else json.dumps(value)
        if real["type"] == "str" and flag.type.startswith("Literal") and value not in (flag.choices or ()):
            continue
        assert registry.parse_value(flag.name, text) == value, flag
        checked[real["type"]] = checked.get(real["type"], 0) + 1
    # the loop skips what it cannot check: make sure it checked many flags of every simple type
    # (torch 2.13: 345 bool, 65 int, 58 str, 12 float)
    assert sum(checked.values()) >= 300 and set(checked) == {"bool", "int", "float", "str"}, checked


# ---------------------------------------------------------------------------- lookups and values


def test_unknown_flag_suggests(registry: Registry) -> None:
    with pytest.raises(UnknownFlag) as err:
        registry.get("max_fusion_sise")
    assert str(err.value).startswith("unknown Inductor flag 'max_fusion_sise'; did you mean: max_fusion_size")
    with pytest.raises(UnknownFlag, match="triton.cudagraphs"):
        registry.get("cudagraphs")  # same leaf name in a subconfig
    with pytest.raises(UnknownFlag):
        registry.parse_value("no_such_flag_xyz", "1")


@pytest.mark.parametrize("text,value", [
    ("true", True), ("False", False), ("1", True), ("0", False), ("yes", True), ("no", False),
    ("on", True), ("OFF", False),
])
def test_parse_bool(registry: Registry, text: str, value: bool) -> None:
    assert registry.parse_value("triton.cudagraphs", text) is value


def test_parse_bad_bool(registry: Registry) -> None:
    with pytest.raises(FlagValueError) as err:
        registry.parse_value("triton.cudagraphs", "maybe")
    assert str(err.value) == "triton.cudagraphs expects a bool (true/false), got 'maybe'"


def test_parse_literal(registry: Registry) -> None:
    name = "triton_kernel_default_layout_constraint"
    assert registry.parse_value(name, "flexible_layout") == "flexible_layout"
    with pytest.raises(FlagValueError) as err:
        registry.parse_value(name, "rigid")
    assert "one of 'needs_fixed_stride_order', 'flexible_layout'" in str(err.value)
    assert str(err.value).endswith("got 'rigid'")


def test_parse_numbers_strings_optional(registry: Registry) -> None:
    assert registry.parse_value("max_fusion_size", "128") == 128
    with pytest.raises(FlagValueError, match="max_fusion_size expects an int, got '1.5'"):
        registry.parse_value("max_fusion_size", "1.5")
    assert registry.parse_value("cpp.simdlen", "none") is None
    assert registry.parse_value("cpp.simdlen", "16") == 16
    with pytest.raises(FlagValueError, match="an int or None"):
        registry.parse_value("cpp.simdlen", "wide")
    float_flag = next(f for f in registry if f.type == "float")
    assert registry.parse_value(float_flag.name, "2.5") == 2.5
    assert registry.parse_value("max_autotune_gemm_backends", "ATEN,TRITON") == "ATEN,TRITON"


def test_parse_backend_combinations(registry: Registry) -> None:
    """The names come from the flag's own doc ("Possible choices are combinations of: …")."""
    assert registry.parse_value("max_autotune_gemm_backends", "aten, cpp") == "aten, cpp"
    assert registry.parse_value("max_autotune_gemm_backends", "ATEN,TRITON,CPP") == "ATEN,TRITON,CPP"
    with pytest.raises(FlagValueError, match=r"combination of ATen, Triton, .*CPP; 'TRITONN' is not one"):
        registry.parse_value("max_autotune_gemm_backends", "ATEN,TRITONN")
    assert registry.parse_value("max_autotune_conv_backends", "ATEN,ANY") == "ATEN,ANY"  # no list


def test_parse_json_for_containers(registry: Registry) -> None:
    list_flag = next(f for f in registry if f.type == "list[str]")
    assert registry.parse_value(list_flag.name, '["a", "b"]') == ["a", "b"]
    with pytest.raises(FlagValueError, match="JSON for list\\[str\\]"):
        registry.parse_value(list_flag.name, "a,b")
    dict_flag = next(f for f in registry if f.type.startswith("dict["))
    assert registry.parse_value(dict_flag.name, '{"k": 1}') == {"k": 1}
    with pytest.raises(FlagValueError):
        registry.parse_value(dict_flag.name, "[1]")  # valid JSON, wrong container


def test_search(registry: Registry) -> None:
    hits = registry.search("CUDAGRAPH")
    assert "triton.cudagraphs" in [f.name for f in hits]
    assert all("cudagraph" in (f.name + f.doc).lower() for f in hits)
    glob = registry.search("triton.*")
    assert glob and all(f.name.startswith("triton.") for f in glob)
    assert "triton.cudagraphs" in [f.name for f in glob]
    assert registry.search("no-such-thing-anywhere") == []


# ---------------------------------------------------------------------------- CLI


def test_flags_main_table() -> None:
    out = io.StringIO()
    assert flags_main("triton.cudagraph*", False, Console(file=out, width=200)) == 0
    text = out.getvalue()
    assert "triton.cudagraphs" in text and "TORCHINDUCTOR_CUDAGRAPHS" in text


def test_flags_main_json() -> None:
    out = io.StringIO()
    assert flags_main("max_fusion_size", True, Console(file=out, width=80)) == 0
    rows = json.loads(out.getvalue())
    row = next(r for r in rows if r["name"] == "max_fusion_size")
    assert row["type"] == "int" and isinstance(row["default"], int) and row["doc"]


def test_flags_main_no_match() -> None:
    out = io.StringIO()
    assert flags_main("max_fusion_sise", False, Console(file=out, width=200)) == 1
    assert "no Inductor flag matches 'max_fusion_sise'" in out.getvalue()
    assert "max_fusion_size" in out.getvalue()


def test_registry_does_not_import_torch() -> None:
    out = _run_python(textwrap.dedent("""
        import io, sys
        from rich.console import Console
        from tuidebug.cli.compiling import print_flags as flags_main
        from tuidebug.compiler.flags import load_registry
        registry = load_registry()
        registry.parse_value("triton.cudagraphs", "true")
        flags_main("fusion", False, Console(file=io.StringIO()))
        print(len(registry.flags), "torch" in sys.modules, [m for m in sys.modules if m.startswith("torch")])
    """))
    count, imported, modules = out.split(" ", 2)
    assert int(count) >= 200
    assert imported == "False", modules


# ---------------------------------------------------------------------------- parser patterns


SYNTHETIC = '''
import os
from torch.utils._config_module import Config, inherit_fields_from, install_config_module
from torch._environment import is_fbcode

def helper_default() -> int | None:
    return int(os.environ["MY_HELPER_VAR"]) if "MY_HELPER_VAR" in os.environ else None

# first line of doc
# second line of doc
# pyrefly: ignore [bad-assignment]
documented: int = 3 * 4  # trailing note
"""A docstring after the assignment."""

_private = os.environ.get("PRIVATE_VAR", "x")
uses_private = _private + "!"
helper_value = helper_default()
func_ref = helper_default
mode: "Literal['a', 'b'] | None" = "a"
fb_path = "/fb/path" if is_fbcode() else None
forced = Config(env_name_force=["FORCE_A", "FORCE_B"], env_name_default="DEF_C", default=[1, 2])
maybe_dir: str | None
if is_fbcode():
    maybe_dir = "/internal"
else:
    maybe_dir = None

# doc on the if
if is_fbcode():
    plain_dir = "/internal"
else:
    plain_dir = None

try:
    import fancy_module
    have_fancy = True
except ImportError:
    have_fancy = False

class outer:
    depth = 1

    class inner:
        # deepest flag
        flag: bool = os.environ.get("INNER_FLAG", "0") == "1"

    class _hidden:
        secret = 1

class base:
    shared = "base"
    # overridden below
    over = 1

@inherit_fields_from(base)
class child(base):
    over = 2
'''


def test_synthetic_patterns(tmp_path: Path) -> None:
    path = tmp_path / "config.py"
    path.write_text(SYNTHETIC)
    reg = load_registry(path)
    assert set(reg.flags) == {
        "documented", "uses_private", "helper_value", "mode", "fb_path", "forced", "maybe_dir",
        "plain_dir", "have_fancy",
        "outer.depth", "outer.inner.flag", "base.shared", "base.over", "child.over", "child.shared",
    }
    doc = reg.get("documented")
    assert (doc.type, doc.default, doc.default_repr) == ("int", 12, None)
    assert doc.doc == "first line of doc\nsecond line of doc\ntrailing note\nA docstring after the assignment."
    assert reg.get("uses_private").env == ("PRIVATE_VAR",)
    assert reg.get("uses_private").type == "str"
    helper = reg.get("helper_value")
    assert (helper.env, helper.type, helper.default_repr) == (("MY_HELPER_VAR",), "int | None", "helper_default()")
    assert reg.get("mode").choices == ("a", "b")
    assert reg.parse_value("mode", "None") is None
    assert (reg.get("fb_path").default, reg.get("fb_path").type) == (None, "str | None")
    forced = reg.get("forced")
    assert (forced.default, forced.env, forced.type) == ([1, 2], ("FORCE_A", "FORCE_B", "DEF_C"), "list")
    assert (reg.get("maybe_dir").type, reg.get("maybe_dir").default) == ("str | None", None)
    plain = reg.get("plain_dir")
    assert (plain.default, plain.default_repr, plain.doc) == (None, None, "doc on the if")
    fancy = reg.get("have_fancy")  # set in a try/except: which branch wins is unknowable statically
    assert (fancy.type, fancy.default, fancy.default_known) == ("bool", None, False)
    inner = reg.get("outer.inner.flag")
    assert (inner.type, inner.env, inner.doc) == ("bool", ("INNER_FLAG",), "deepest flag")
    assert reg.get("child.over").default == 2
    assert reg.get("child.shared").default == "base"


SYNTHETIC_HELPERS = '''
import os, sys
from torch.utils._config_module import Config, get_tristate_env

def branchy() -> int | None:
    """docstring"""
    value = os.environ.get("BRANCHY")
    if value is None:
        return 10
    if value.lower() in ("none", "all"):
        return None
    return int(value)

def with_import() -> int:
    import multiprocessing
    return multiprocessing.cpu_count()

branch_default = branchy()
counted = with_import()
tristate = get_tristate_env("TRI", default=False)
indexed = os.environ["IDX"] if "IDX" in os.environ else "none"
upper = os.environ.get("UP", "a,b").upper()
platform_dep = "clang++" if sys.platform == "darwin" else "g++"
forced = Config(env_name_force="FORCE", env_name_default="DEF", default=3)
'''


def test_values_in_force_evaluates_only_safe_patterns(tmp_path: Path) -> None:
    path = tmp_path / "config.py"
    path.write_text(SYNTHETIC_HELPERS)
    empty = values_in_force({}, path)
    assert empty.current["branch_default"] == 10 and empty.defaults["branch_default"] == 10
    assert "counted" not in empty.current  # a helper that imports: never run
    assert "platform_dep" not in empty.current  # sys.platform: not an environment read
    assert (empty.current["tristate"], empty.current["indexed"], empty.current["upper"]) == \
        (False, "none", "A,B")
    assert empty.current["forced"] == 3 and "forced" not in empty.defaults  # a literal default
    env = {"BRANCHY": "ALL", "TRI": "1", "IDX": "x", "UP": "aten", "DEF": "0", "FORCE": "7"}
    set_ = values_in_force(env, path)
    assert set_.current["branch_default"] is None and set_.current["tristate"] is True
    assert (set_.current["indexed"], set_.current["upper"]) == ("x", "ATEN")
    assert set_.current["forced"] == "7"  # env_name_force wins over env_name_default
    assert values_in_force({"DEF": "0"}, path).current["forced"] is False
    assert values_in_force({"BRANCHY": "12"}, path).current["branch_default"] == 12
    assert load_registry(path).get("branch_default").default_repr == "branchy()"  # unchanged


ENV_OVERRIDES = {"TORCHINDUCTOR_MAX_AUTOTUNE": "1", "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
                 "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE": "1", "TORCHINDUCTOR_PROLOGUE_FUSION": "0",
                 "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS": "aten,triton",
                 "TORCHINDUCTOR_AUTOTUNE_NUM_CHOICES_DISPLAYED": "all", "INDUCTOR_PROVENANCE": "2"}


@pytest.mark.slow  # imports torch's Inductor config in a child, twice
@pytest.mark.parametrize("overrides", [{}, ENV_OVERRIDES], ids=["clean", "overrides"])
def test_values_in_force_match_the_real_module(registry: Registry, overrides: dict) -> None:
    """What torch's config module really holds in a process with that environment."""
    read_by_flags = {var for flag in registry for var in flag.env}
    env = {k: v for k, v in os.environ.items()
           if k not in read_by_flags and not k.startswith(("TORCH", "INDUCTOR", "AOT"))}
    env.update(overrides)
    real = json.loads(_run_python(textwrap.dedent("""
        import json
        import torch._inductor.config as config
        print(json.dumps({k: repr(v) for k, v in config.get_config_copy().items()}))
    """), env))
    in_force = values_in_force(env)
    compared = [n for n in in_force.current if n in real]
    assert len(compared) >= 550
    wrong = {n: (in_force.current[n], real[n]) for n in compared if repr(in_force.current[n]) != real[n]}
    assert not wrong
    env_defaults = [f for f in registry if not f.default_known and f.env]
    assert sum(f.name in in_force.defaults for f in env_defaults) >= 180  # of 213 in torch 2.13
    if overrides:
        assert in_force.current["max_autotune"] is True and in_force.current["fx_graph_cache"] is False
        assert in_force.current["max_autotune_gemm_backends"] == "ATEN,TRITON"


def _table(pattern: str, width: int, env: dict | None = None) -> str:
    out = io.StringIO()
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        assert flags_main(pattern, False, Console(file=out, width=width)) == 0
    finally:
        os.environ.clear()
        os.environ.update(old)
    return out.getvalue()


@pytest.mark.parametrize("width", [80, 100, 140])
def test_flags_table_keeps_every_column(registry: Registry, width: int) -> None:
    """The longest names fold: type, default, current, env and doc stay on screen."""
    longest = max(registry, key=lambda f: len(f.name))
    assert len(longest.name) > 80
    text = _table(longest.name, width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines)
    header = next(line for line in lines if "name" in line and "doc" in line)
    for column in ("type", "default", "current", "env", "doc"):
        assert column in header, (width, header)
    flat = "".join(line.split("│")[1].strip() for line in lines if line.count("│") > 2)
    assert longest.name in flat  # folded over several lines, all of it there


def test_flags_table_shows_current_and_evaluated_defaults() -> None:
    text = _table("triton.cudagraphs", 200)
    assert 'os.environ.get("TORCHI' in text and "= False" in text  # the expression, evaluated
    text = _table("triton.cudagraphs", 200, {"TORCHINDUCTOR_CUDAGRAPHS": "1"})
    row = next(line for line in text.splitlines() if line.startswith("│ triton.cudagraphs "))
    assert row.split("│")[4].strip() == "True"  # the current column
    out = io.StringIO()
    assert flags_main("max_fusion_size", True, Console(file=out, width=80)) == 0
    row = next(r for r in json.loads(out.getvalue()) if r["name"] == "max_fusion_size")
    assert (row["current"], row["current_known"], row["default_in_env"]) == (64, True, None)


def test_cache_follows_mtime(tmp_path: Path) -> None:
    path = tmp_path / "config.py"
    path.write_text("a = 1\n")
    first = load_registry(str(path))
    assert load_registry(path) is first
    path.write_text("a = 1\nb = 2\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert set(load_registry(path).flags) == {"a", "b"}
