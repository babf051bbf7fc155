"""What ``info`` and the TUI's overview say about vLLM's compilation (``queries.vllm``): its
config, each compile range or CUDA-graph capture size with the piecewise submodules compiled
for it, the graphs it dumped, and its post-grad passes. Every string from the log is inert."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.text import Text

from tuidebug.inert import inert_text

MAX_SUBMODULES = 12  # named per range; the rest are counted


def vllm_renderables(v: dict[str, Any]) -> list[RenderableType]:
    """The vLLM section: a heading, the config, the compile ranges, the dumps, the passes."""
    out: list[RenderableType] = [Text("vLLM compilation", style="bold")]
    cfg = v.get("config") or {}
    for key in ("model", "backend", "mode", "cudagraph_mode", "compile_sizes",
                "compile_ranges_split_points", "compile_ranges_endpoints", "enabled_passes",
                "inductor_passes", "dynamic_shapes_type"):
        if cfg.get(key) not in (None, ""):
            out.append(Text.assemble((f"  {key.replace('_', ' ')}: ", "dim"),
                                     inert_text(cfg[key])))
    if cfg.get("splitting_ops"):
        ops = [o.strip() for o in str(cfg["splitting_ops"]).split(",") if o.strip()]
        out.append(Text.assemble(("  split at: ", "dim"), inert_text(", ".join(ops[:4])),
                                 (f" (+{len(ops) - 4} more ops)" if len(ops) > 4 else "", "dim")))
    pc = v.get("piecewise_compiles") or {}
    if pc.get("logged"):
        total = f" of {pc['announced']}" if pc.get("announced") else ""
        out.append(Text(f"  piecewise compiles logged: {pc['logged']}{total}", style="dim"))
    for r in v.get("compile_ranges") or []:
        subs = [str(s) for s in r.get("submodules") or []]
        shown = ", ".join(subs[:MAX_SUBMODULES]) + (
            f" … +{len(subs) - MAX_SUBMODULES}" if len(subs) > MAX_SUBMODULES else "")
        out.append(Text.assemble(inert_text(f"  {r.get('range')}", "bold"),
                                 (" (CUDA graph capture size)" if r.get("cudagraph_capture_size")
                                  else "", "dim"),
                                 (f"  {len(subs)} submodule(s): ", "dim"), inert_text(shown)))
    if v.get("split_graph"):
        out.append(Text.assemble(("  piecewise split graph: ", "dim"),
                                 inert_text(v["split_graph"])))
    subs = v.get("submodules") or []
    if subs:
        compiled = [str(x.get("name")) for x in subs if x.get("compiled_for")]
        out.append(Text.assemble((f"  split into {len(subs)} submodules", "dim"),
                                 (f", {len(compiled)} compiled in this log: " if compiled else "",
                                  "dim"),
                                 inert_text(", ".join(compiled[:MAX_SUBMODULES])
                                            + (" …" if len(compiled) > MAX_SUBMODULES else ""))))
    others = [d for d in v.get("dumps") or [] if d.get("file") != v.get("split_graph")]
    if others:
        out.append(Text.assemble((f"  {len(others)} graph dump(s): ", "dim"),
                                 inert_text(", ".join(str(d.get("name")) for d in others[:6])),
                                 (" …" if len(others) > 6 else "", "dim")))
    passes = v.get("post_grad_passes") or []
    for p in passes[:20]:
        what = (f"+{p['added']} -{p['removed']} ~{p['modified']}" if p.get("changed")
                else "no change")
        out.append(Text.assemble(("  post-grad pass ", "dim"),
                                 inert_text(f"{p.get('name')}", "bold"),
                                 inert_text(f" ({p.get('graph')}, stage {p.get('stage')}): "),
                                 (what, "dim")))
    if len(passes) > 20:
        out.append(Text(f"  … {len(passes) - 20} more post-grad passes", style="dim"))
    return out
