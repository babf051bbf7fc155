"""A corpus of hostile traces, built by hand from a committed real trace (no compiles).

Each case copies ``tests/fixtures/cuda_mlp_autotune`` (a real capture) and damages it the way an
attacker would (docs/security.md): escape sequences and Rich markup in every kind of name, paths
out of the trace, FIFOs, devices, wrong JSON types, deep nesting, huge integers and lines, NaN,
DOT injection, payloads that leave a marker file if anything runs them.

``build(name, root, outside, marker)`` writes case ``name`` under ``root / name`` and returns a
``Hostile`` saying which file a problem must name (None: the data is valid, only hostile).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

BASE = Path(__file__).resolve().parent.parent / "fixtures" / "cuda_mlp_autotune"
GRAPH = "0_0-inference"

# What a payload looks like on the terminal if it is not made inert: OSC 52 (set the
# clipboard), clear screen, OSC 8 link, a bell, Rich markup (a closing tag that crashes the
# parser, a link, a style), DOT/SVG injection, a bidi override, a carriage return
ESC = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[H\x1b]8;;file:///etc/passwd\x1b\\click\x1b]8;;\x1b\\"
MARKUP = "[/][link=file:///etc/passwd]click[/link][bold red]x[/]"
DOT = '" URL="javascript:alert(1)" a:b:c" xlink:href="javascript:alert(2)\\l\\N<b>{}|'
EVIL = f"evil{ESC}{MARKUP}{DOT}\u202e\r\n\tend"


@dataclass
class Hostile:
    path: Path
    problem_file: str | None  # a problem must name this file (relative to the trace)


def _load(p: Path) -> Any:
    return json.loads(p.read_text())


def _dump(p: Path, data: Any) -> None:
    p.write_text(json.dumps(data))


def _payload_script(marker: Path) -> str:
    return f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"


def _names_everywhere(t: Path, outside: Path, marker: Path) -> str | None:
    """EVIL in every name a viewer shows: graph kind/status, error, warnings, command, config,
    node names and targets, kernel names, fusion reasons, autotune ops, compile reasons."""
    g = t / "graphs" / GRAPH
    m = _load(t / "manifest.json")
    m["command"] = ["python", EVIL]
    m["warnings"] = [EVIL]
    m["status"] = "failed"
    m["error"] = {"phase": EVIL, "type": EVIL, "message": EVIL, "graph": GRAPH}
    m["graphs"][0]["kind"] = EVIL
    m["script_error"] = {"type": EVIL, "message": EVIL, "after_compiling": True}
    m["imported_from"] = {"kind": EVIL, "path": EVIL, "missing": [EVIL]}
    for c in m["compiles"]:
        c.setdefault("summary", {})["co_name"] = EVIL
    _dump(t / "manifest.json", m)
    cfg = _load(t / "config.json")
    cfg["changed"] = {EVIL: {"value": EVIL, "default": None}, "cpp.cxx": {"value": EVIL,
                                                                        "default": None}}
    _dump(t / "config.json", cfg)
    for snap in (g / "stages").iterdir():
        data = _load(snap)
        for n in data["nodes"]:
            n["target"] = EVIL
            n["module"] = EVIL
            if n.get("source"):
                n["source"] = {"file": EVIL, "line": 1, "fn": EVIL, "code": EVIL}
        data["nodes"][1]["name"] = EVIL
        _dump(snap, data)
    k = _load(g / "code" / "kernels.json")
    k["kernels"][0]["name"] = EVIL
    _dump(g / "code" / "kernels.json", k)
    (g / "fusion.jsonl").write_text("".join(
        json.dumps({"action": "rejected", "node1": EVIL, "node2": "op1", "reason": EVIL}) + "\n"
        for _ in range(3)))
    lines = [json.loads(x) for x in (g / "autotune.jsonl").read_text().splitlines() if x]
    for r in lines:
        r["op"] = EVIL
        for c in r.get("choices") or []:
            c["name"] = EVIL
            c["error"] = EVIL
    (g / "autotune.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    _dump(g / "error.json", {"phase": "lowering", "type": EVIL, "message": EVIL, "graph": GRAPH,
                             "traceback": [EVIL]})
    (g / "ir_post_fusion.txt").write_text(EVIL * 3)
    (g / "code" / "wrapper.py").write_text(_payload_script(marker) + f"# {EVIL}\n")
    for c in (t / "compiles").iterdir():
        d = _load(c)
        d["recompile_reasons"] = [EVIL]
        d["dynamo_graph_break_reason"] = [EVIL]
        _dump(c, d)
    return None


def _runs_on_open(t: Path, outside: Path, marker: Path) -> str | None:
    """The recorded command runs a script shipped in the trace; the config names a compiler."""
    (t / "evil.py").write_text(_payload_script(marker))
    m = _load(t / "manifest.json")
    m["command"] = ["tuidebug", "trace", str(t / "evil.py")]
    m["cwd"] = str(t)
    m["config_overrides"] = {"cpp.cxx": [None, str(t / "evil.py")]}  # the registered type
    _dump(t / "manifest.json", m)
    (t / "graphs" / GRAPH / "repro" / "fx_graph_runnable.py").write_text(_payload_script(marker))
    return None


def _graph_id_traversal(t: Path, outside: Path, marker: Path) -> str | None:
    m = _load(t / "manifest.json")
    rel = os.path.relpath(outside, t / "graphs")
    m["graphs"].append({"id": rel, "kind": "inference", "compile_id": "0/0", "status": "ok"})
    _dump(t / "manifest.json", m)
    return "manifest.json"


def _stage_file_escape(t: Path, outside: Path, marker: Path) -> str | None:
    meta = _load(t / "graphs" / GRAPH / "meta.json")
    last = [s for s in meta["stages"] if s.get("file")][-1]
    last["file"] = os.path.relpath(outside / "secret.json", t / "graphs" / GRAPH)
    _dump(t / "graphs" / GRAPH / "meta.json", meta)
    return "secret.json"


def _stage_absolute(t: Path, outside: Path, marker: Path) -> str | None:
    meta = _load(t / "graphs" / GRAPH / "meta.json")
    for s, target in zip([s for s in meta["stages"] if s.get("file")],
                         ["/dev/zero", str(outside / "secret.json"), "/dev/stdin"]):
        s["file"] = target
    _dump(t / "graphs" / GRAPH / "meta.json", meta)
    return "/dev/zero"


def _symlinks_out(t: Path, outside: Path, marker: Path) -> str | None:
    g = t / "graphs" / GRAPH
    snap = sorted((g / "stages").iterdir())[-1]
    snap.unlink()
    snap.symlink_to(outside / "secret.json")
    (g / "ir_post_fusion.txt").unlink()
    (g / "ir_post_fusion.txt").symlink_to(outside / "secret.json")
    (g / "code" / "wrapper.py").unlink()
    (g / "code" / "wrapper.py").symlink_to("/dev/zero")
    (t / "config.json").unlink()
    (t / "config.json").symlink_to(outside / "secret.json")
    return "config.json"


def _symlinked_graph_dir(t: Path, outside: Path, marker: Path) -> str | None:
    g = t / "graphs" / GRAPH
    shutil.copytree(g, outside / "graph-copy")
    shutil.rmtree(g)
    g.symlink_to(outside / "graph-copy")
    return "meta.json"


def _fifos(t: Path, outside: Path, marker: Path) -> str | None:
    g = t / "graphs" / GRAPH
    for p in (g / "meta.json", g / "code" / "kernels.json", g / "fusion.jsonl",
              g / "ir_post_fusion.txt", t / "runtime.json"):
        p.unlink()
        os.mkfifo(p)
    return "meta.json"


def _directories(t: Path, outside: Path, marker: Path) -> str | None:
    g = t / "graphs" / GRAPH
    for p in (t / "config.json", g / "provenance.json", g / "code" / "wrapper.py",
              g / "autotune.jsonl"):
        p.unlink()
        p.mkdir()
    return "config.json"


def _wrong_types(t: Path, outside: Path, marker: Path) -> str | None:
    g = t / "graphs" / GRAPH
    m = _load(t / "manifest.json")
    m["graphs"].append({"id": 7, "kind": [], "compile_id": {}, "status": 3})
    m["compiles"] = [{"id": 0}, "x", {"id": "0/0", "graphs": "x"}]
    m["error"] = "a string"
    m["warnings"] = {"a": 1}
    m["command"] = 5
    m["imported_from"] = []
    _dump(t / "manifest.json", m)
    meta = _load(g / "meta.json")
    meta["stages"] = ["x", 3, {"name": 5, "file": 7, "counts": [], "index": "z"}] + meta["stages"]
    meta["phase_times_s"] = [1, 2]
    meta["cudagraphs"] = "yes"
    _dump(g / "meta.json", meta)
    _dump(g / "code" / "kernels.json", {"kernels": {"a": 1}})
    _dump(g / "error.json", "boom")
    _dump(g / "provenance.json", {"kernels": [], "fx_to_kernels": [1], "pre_to_post": "x"})
    _dump(g / "code" / "timings.json", {"kernels": [1, 2], "run": 3})
    _dump(t / "config.json", {"values": [], "changed": "x"})
    _dump(t / "runtime.json", {"checks": [1]})
    snap = sorted((g / "stages").iterdir())[-1]
    _dump(snap, {"nodes": {"a": 1}, "changes": []})
    _dump(g / "ir_post_fusion.json", {"nodes": ["x", {"name": 1}]})
    (g / "fusion.jsonl").write_text('"x"\n[1]\n{"action": 5, "reason": []}\n')
    (g / "autotune.jsonl").write_text('{"choices": "x", "op": 1}\n7\n')
    (g / "code" / "launches.jsonl").write_text('{"kernel": 1}\n{"launch": []}\n')
    return "meta.json"


def _manifest_list(t: Path, outside: Path, marker: Path) -> str | None:
    _dump(t / "manifest.json", [1, 2, 3])
    return "manifest.json"


def _deep_json(t: Path, outside: Path, marker: Path) -> str | None:
    g = t / "graphs" / GRAPH
    (g / "meta.json").write_text("[" * 200_000 + "]" * 200_000)
    (t / "runtime.json").write_text('{"checks": ' + "[" * 1500 + "]" * 1500 + "}")
    (g / "fusion.jsonl").write_text("[" * 100_000 + "\n")
    return "meta.json"


def _huge_ints(t: Path, outside: Path, marker: Path) -> str | None:
    g = t / "graphs" / GRAPH
    text = (g / "meta.json").read_text()
    (g / "meta.json").write_text(text.replace('"index": 0', '"index": ' + "9" * 5000, 1))
    m = _load(t / "manifest.json")
    m["pid"] = 10 ** 4000
    _dump(t / "manifest.json", m)
    return "meta.json"


def _nan(t: Path, outside: Path, marker: Path) -> str | None:
    r = (t / "runtime.json").read_text().replace("8.083879947662354e-07", "NaN")
    (t / "runtime.json").write_text(r.replace("7.158917359579161e-05", "Infinity"))
    meta = (t / "graphs" / GRAPH / "meta.json").read_text()
    (t / "graphs" / GRAPH / "meta.json").write_text(
        meta.replace('"duration_s": null', '"duration_s": NaN')
        .replace('"kernel_compile": 3.019671', '"kernel_compile": Infinity')
        .replace('"codegen": 8.554955481000007', '"codegen": Infinity'))
    return None


def _many_graphs(t: Path, outside: Path, marker: Path) -> str | None:
    m = _load(t / "manifest.json")
    m["graphs"] += [{"id": f"g{i}", "kind": "inference", "compile_id": f"{i}/0", "status": "ok"}
                    for i in range(5000)]
    _dump(t / "manifest.json", m)
    return "graphs/g0/"


def _huge_line(t: Path, outside: Path, marker: Path) -> str | None:
    g = t / "graphs" / GRAPH
    big = json.dumps({"action": "rejected", "node1": "op0", "node2": "op1",
                      "reason": "x" * (20 * 1024 * 1024)})
    with open(g / "fusion.jsonl", "a") as f:
        f.write(big + "\n")
    (g / "ir_post_fusion.txt").write_text("y" * (6 * 1024 * 1024))
    return None  # info reads neither; the IR screen reports both (checked on the Trace)


def _dot_injection(t: Path, outside: Path, marker: Path) -> str | None:
    g = t / "graphs" / GRAPH
    for snap in (g / "stages").iterdir():
        data = _load(snap)
        for i, n in enumerate(data["nodes"]):
            old = n["name"]
            new = f"{old}{DOT}\x1b[2J\"'\n{i}"
            n["name"] = new
            n["module"] = f"blocks.{DOT}.x"
            n["module_type"] = DOT
            for other in data["nodes"]:
                other["inputs"] = [new if x == old else x for x in other.get("inputs") or []]
                other["users"] = [new if x == old else x for x in other.get("users") or []]
                other["args"] = json.loads(json.dumps(other.get("args")).replace(
                    json.dumps({"node": old}), json.dumps({"node": new})))
        _dump(snap, data)
    return None


def _new_files_wrong_types(t: Path, outside: Path, marker: Path) -> str | None:
    """The files added with profiles, collectives, dynamic shapes and cache keys, with values
    of the wrong types where their readers iterate or divide: a collective's shape a number,
    a profile's times NaN/infinite/negative (a speedup of 0; its backward's too, naming a graph
    that is not there), a recompile's reasons a number,
    provenance naming kernels by objects."""
    g = t / "graphs" / GRAPH
    _dump(g / "collectives.json", {"collectives": [
        {"index": 0, "op": "all_reduce", "inputs": [{"shape": 5, "dtype": EVIL}, 7],
         "args": {EVIL: [1]}, "group": EVIL, "group_ranks": [{}],
         "user_source": {"file": EVIL, "line": []}}]})
    kernels = [k["name"] for k in _load(g / "code" / "kernels.json")["kernels"]]
    (t / "profile.json").write_text(json.dumps({"compiles": {"0/0": {
        "device": EVIL, "eager_graph": GRAPH, "eager_nodes": [{"node": EVIL, "time_s": -1}],
        "compiled": {"wall_s": 1e300}, "eager": {"wall_s": 1e-300},
        "device_peak": {"dram_gbps": 0, "tflops": {"float32": -1}},
        "kernels": [{"graph": GRAPH, "kernel": kernels[0], "time_s": 1.0, "device_s": 1.0,
                     "bytes": 1e9, "calls": 0},
                    {"graph": GRAPH, "kernel": EVIL, "time_s": "NaN", "device_s": 2.0,
                     "bytes": 1e9, "flops": 1e12, "calls": -3}],
        "backward": {"compiled": {"wall_s": "NaN"}, "eager": {"wall_s": -5},
                     "eager_nodes_from": EVIL, "note": EVIL,
                     "eager_nodes": [{"node": EVIL, "time_s": 1e300}, {"node": 5}],
                     "kernels": [{"graph": EVIL, "kernel": EVIL, "call": EVIL, "time_s": 1.0,
                                  "device_s": "NaN", "bytes": 1e9, "calls": 0}]}}}}).replace(
        '"NaN"', "NaN").replace("1e+300", "Infinity"))
    (t / "compiles" / "0_0.shapes.json").write_text(json.dumps({
        "recompile": {"reasons": 5, "values": [EVIL]}, "symbols": [{"name": EVIL, "range": 3}],
        "guards": [{"kind": EVIL, "expr": EVIL}], "specializations": [{"sources": [1, {}]}]}))
    (t / "compiles" / "0_0.cache.json").write_text(json.dumps({"lookups": [
        {"cache": "fx_graph", "result": "miss", "components": [{"name": EVIL, "hash": "1"}]},
        {"cache": "fx_graph", "result": "miss", "components": "x"}, 5]}))
    prov = _load(g / "provenance.json")
    for i, name in enumerate(prov["kernels"]):
        prov["kernels"][name] = ["x", {"ir_nodes": [{}], "fx_nodes": 5, "source": [1]}][i % 2]
    prov["fx_to_kernels"] = {EVIL: 5}
    _dump(g / "provenance.json", prov)
    kj = _load(g / "code" / "kernels.json")
    kj["kernels"][0]["handles"] = [7, {}]
    _dump(g / "code" / "kernels.json", kj)
    # the recompile limit info names comes from the compile's Dynamo config
    c = _load(t / "compiles" / "0_0.json")
    c.setdefault("metrics", {}).update(dynamo_config=json.dumps({"recompile_limit": EVIL}),
                                       fail_type=EVIL, fail_reason="recompile limit exceeded")
    c["recompile_reasons"] = [EVIL]
    _dump(t / "compiles" / "0_0.json", c)
    return "provenance.json"


CASES: dict[str, Callable[[Path, Path, Path], str | None]] = {
    "names_everywhere": _names_everywhere,
    "runs_on_open": _runs_on_open,
    "graph_id_traversal": _graph_id_traversal,
    "stage_file_escape": _stage_file_escape,
    "stage_absolute": _stage_absolute,
    "symlinks_out": _symlinks_out,
    "symlinked_graph_dir": _symlinked_graph_dir,
    "fifos": _fifos,
    "directories": _directories,
    "wrong_types": _wrong_types,
    "manifest_list": _manifest_list,
    "deep_json": _deep_json,
    "huge_ints": _huge_ints,
    "nan": _nan,
    "many_graphs": _many_graphs,
    "huge_line": _huge_line,
    "dot_injection": _dot_injection,
    "new_files_wrong_types": _new_files_wrong_types,
}


# -- TORCH_COMPILE_DEBUG folders: what the debug-folder importer must not read --------------------

SECRET = "a secret outside the debug folder"


def _model(d: Path) -> Path:
    return next(d.glob("run_*/torchinductor/model__*"))


def _debug_symlinks_out(d: Path, outside: Path) -> str:
    """Files of the folder that are links to a file outside it, and to /dev/zero."""
    m = _model(d)
    for name in ("ir_post_fusion.txt", "fx_graph_readable.py"):
        (m / name).unlink()
        (m / name).symlink_to(outside / "secret.txt")
    (m / "output_code.py").unlink()
    (m / "output_code.py").symlink_to("/dev/zero")
    log = next(d.glob("run_*/torchdynamo/debug.log"))
    log.unlink()
    log.symlink_to(outside / "secret.txt")
    (log.parent / "zero.log").symlink_to("/dev/zero")
    tl = next((d / "tlparse").iterdir())
    shutil.copy(tl, outside / "other.log")
    (d / "tlparse" / "elsewhere.log").symlink_to(outside / "other.log")
    return "ir_post_fusion.txt"


def _debug_folder_out(d: Path, outside: Path) -> str:
    """A model folder that is a link to a folder outside."""
    m = _model(d)
    shutil.copytree(m, outside / "model-copy")
    (outside / "model-copy" / "ir_post_fusion.txt").write_text(SECRET)
    shutil.rmtree(m)
    m.symlink_to(outside / "model-copy")
    return m.name


def _debug_fifos(d: Path, outside: Path) -> str:
    m = _model(d)
    for p in (m / "fx_graph_readable.py", m / "ir_pre_fusion.txt",
              next(d.glob("run_*/torchdynamo/debug.log")), d / "tlparse" / "fifo.log"):
        if p.exists():
            p.unlink()
        os.mkfifo(p)
    return "ir_pre_fusion.txt"


def _debug_huge(d: Path, outside: Path) -> str:
    """Files of 100 MB (sparse: made at once, never read)."""
    m = _model(d)
    for p in (m / "ir_post_fusion.txt", next(d.glob("run_*/torchinductor/*.log"))):
        with open(p, "wb") as f:
            f.truncate(100 * 1024 * 1024)
    return "ir_post_fusion.txt"


DEBUG_CASES: dict[str, Callable[[Path, Path], str]] = {
    "debug_symlinks_out": _debug_symlinks_out,
    "debug_folder_out": _debug_folder_out,
    "debug_fifos": _debug_fifos,
    "debug_huge": _debug_huge,
}


def build_debug(name: str, source: Path, root: Path, outside: Path) -> tuple[Path, str]:
    """Case ``name``: a copy of the real ``torch_compile_debug`` folder ``source`` under
    ``root``, damaged; (its path, a name the import's warnings must give)."""
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.txt").write_text(SECRET)
    d = root / name / "torch_compile_debug"
    shutil.copytree(source, d, symlinks=True)
    return d, DEBUG_CASES[name](d, outside)


def build(name: str, root: Path, outside: Path, marker: Path) -> Hostile:
    """Case ``name`` as a trace under ``root``. ``outside`` holds a secret.json that a trace
    must never read; ``marker`` is what a payload writes if anything runs it."""
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.json").write_text(json.dumps({"secret": "outside the trace"}))
    t = root / name
    shutil.copytree(BASE, t, symlinks=True)
    return Hostile(t, CASES[name](t, outside, marker))
