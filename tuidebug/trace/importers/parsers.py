"""One parser per kind of TORCH_TRACE record (the interface is in ``records``). Pure; no torch.

Each parser turns one record into facts; none writes a file or keeps state. ``REGISTRY`` holds
them all; ``REGISTRY.parse(envelope)`` runs the one for a record.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tuidebug.trace.format import safefile
from tuidebug.trace.importers import records as r
from tuidebug.trace.importers import shapes_log, vllm
from tuidebug.trace.importers.records import Envelope, Fact
from tuidebug.trace.importers.segments import PHASE_OF_EVENT

_ERROR_RE = re.compile(r"^(?P<t>[A-Za-z_][\w.]*(?:Error|Exception|Failed|Unsupported|Exit|"
                       r"Interrupt)): (?P<m>.*)$", re.S)
DYNAMIC_SHAPE_EVENTS = frozenset({
    "create_symbol", "create_unbacked_symbol", "guard_added", "guard_added_fast",
    "propagate_real_tensors",
    "symbolic_shape_specialization", "propagate_real_tensors_provenance", "expression_created",
    "unbacked_symbol", "missing_fake_kernel", "mismatched_fake_kernel", "create_symbolic_sizes",
})
_IGNORED_EVENTS = frozenset({"describe_storage", "describe_tensor", "describe_source"})


class _Parser:
    name = ""
    names: frozenset[str] = frozenset()

    def metadata(self, env: Envelope) -> Any:
        """The record's own metadata (``{"dynamo_output_graph": {...}}`` -> ``{...}``)."""
        m = env.meta.get(env.event)
        return m if m is not None else {}

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]:
        raise NotImplementedError


# -- graphs ---------------------------------------------------------------------------------------

class GraphParser(_Parser):
    """A printed FX graph: one stage of a graph (``if_missing``: unless the graph has it)."""

    def __init__(self, name: str, target: str, stage: str | None, if_missing: bool = False,
                 also: tuple[str, ...] = ()) -> None:
        self.name = name
        self.names = frozenset((name, *also))
        self.target, self.stage, self.if_missing = target, stage, if_missing

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]:
        return [r.Snapshot(self.target, self.stage, env, self.if_missing)]


class RunnableParser(_Parser):
    name = "artifact:fx_graph_runnable"
    names = frozenset({name})

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]:
        out: list[Fact] = [r.Touch(r.SEGMENT)]
        text = env.payload()
        if text:
            out.append(r.Runnable(r.SEGMENT, text))
        return out


class OutputCodeParser(_Parser):
    name = "inductor_output_code"
    names = frozenset({name})

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]:
        code = env.payload()
        if not code.strip():
            return [r.Touch(r.SEGMENT), r.OutputCode(r.SEGMENT, "", None, False)]
        filename = metadata.get("filename") if isinstance(metadata, dict) else None
        return [r.Touch(r.SEGMENT), r.OutputCode(r.SEGMENT, code,
                                                  str(filename) if filename else None,
                                                  not env.payload_ok)]


class ProvenanceParser(_Parser):
    name = "inductor_provenance"
    names = frozenset({"artifact:inductor_provenance_tracking_node_mappings",
                       "artifact:inductor_provenance_tracking_kernel_stack_traces"})

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]:
        out: list[Fact] = [r.Touch(r.SEGMENT)]
        if not env.has_payload:
            return out  # a cache hit logs the artifact without its content
        data, warn = env.json_payload()
        out += warn
        if isinstance(data, dict):
            if env.name.endswith("node_mappings"):
                out.append(r.Provenance(r.SEGMENT, mappings=data))
            else:
                out.append(r.Provenance(r.SEGMENT, stack_traces=data))
        return out


class CacheParser(_Parser):
    """FX graph cache and AOTAutograd cache results."""

    def __init__(self, cache: str) -> None:
        self.cache = cache
        prefix = "fx_graph_cache" if cache == "fx_graph" else "aotautograd_cache"
        self.name = f"artifact:{prefix}"
        self.names = frozenset(f"artifact:{prefix}_{x}" for x in ("miss", "hit", "bypass"))

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]:
        result = env.name.rsplit("_", 1)[-1]  # hit | miss | bypass
        out: list[Fact] = [r.Touch(r.SEGMENT)] if self.cache == "fx_graph" else []
        data = None
        if env.has_payload:
            data, warn = env.json_payload()
            out += warn
        data = data if isinstance(data, dict) else None
        target = r.SEGMENT if self.cache == "fx_graph" else r.FRAME_IF_GRAPH
        out.append(r.CacheEvent(target, self.cache, result, env.lineno, data))
        return out


# -- compile-level records ------------------------------------------------------------------------

class DynamoStartParser(_Parser):
    name = "dynamo_start"
    names = frozenset({name})

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]:
        stack = (metadata or {}).get("stack")
        frames = []
        for fr in stack if isinstance(stack, list) else []:
            if not isinstance(fr, dict):
                continue
            fn = fr.get("filename")
            file = env.strings.get(fn, str(fn)) if isinstance(fn, int) else str(fn)
            frames.append({"file": file, "line": fr.get("line"), "fn": fr.get("name"),
                           "code": fr.get("loc")})
        out: list[Fact] = [r.SetDetail("stack", frames)]
        user = [fr for fr in frames if "/torch/" not in fr["file"].replace("\\", "/")]
        if user:
            out.append(r.SetDetail("origin", user[-1]))
        return out


class MetricsParser(_Parser):
    name = "compilation_metrics"
    names = frozenset({"compilation_metrics", "bwd_compilation_metrics"})

    def metadata(self, env: Envelope) -> Any:
        m = env.meta.get(env.event) or {}
        return m if isinstance(m, dict) else None

    def parse(self, env: Envelope, m: Any) -> list[Fact]:
        backward = env.event == "bwd_compilation_metrics"
        out: list[Fact] = [r.Metrics(m, backward)]
        if not backward and isinstance(m.get("inductor_config"), str):
            config = _config(m)
            if config is not None:
                out.append(r.Config(config))
        if m.get("python_version"):
            out.append(r.Version("python", str(m["python_version"]).split()[0], first_wins=True))
        times = [float(m["start_time"])] if isinstance(m.get("start_time"), (int, float)) else []
        if isinstance(m.get("end_time_us"), (int, float)):
            times.append(m["end_time_us"] / 1e6)
        if times:
            out.append(r.Times(times))
        if m.get("fail_type"):
            out.append(_failure(m, env.lineno, backward))
        return out


def _config(m: dict[str, Any]) -> dict[str, Any] | None:
    def load(key: str) -> Any:
        try:
            v = safefile.loads(m.get(key) or "null")
        except (TypeError, json.JSONDecodeError):
            return None
        return v if isinstance(v, dict) else None

    values = load("inductor_config")
    if values is None:
        return None
    return {"values": values, "changed": {}, "set_by_tuidebug": [],
            "defaults": "not in this log: which flags differ from their defaults "
                        "(trace with tuidebug to get it)",
            "dynamo": load("dynamo_config"), "functorch": load("functorch_config"),
            "compiler": load("compiler_config")}


def _failure(m: dict[str, Any], lineno: int, backward: bool) -> r.Failure:
    fail_type = str(m.get("fail_type"))
    reason = str(m.get("fail_reason") or "")
    typ, message = fail_type, reason
    mm = _ERROR_RE.match(reason)
    if mm:
        typ, message = mm["t"], mm["m"]
    stack = m.get("exception_stack_trace")
    return r.Failure(backward, {
        "type": typ, "message": message, "wrapper_type": fail_type, "log_line": lineno,
        "user_frame": {"file": m.get("fail_user_frame_filename"),
                       "line": m.get("fail_user_frame_lineno")}},
        "".join(stack) if isinstance(stack, list) else "")


class GuardsParser(_Parser):
    name = "dynamo_guards"
    names = frozenset({"dynamo_cpp_guards_str", "dynamo_guards"})

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]:
        if env.event == "dynamo_guards":
            payload, warn = env.json_payload()
            return [*warn, r.SetDetail("guards", payload)]
        return [r.SetDetail("guards", env.payload())]


class AppendParser(_Parser):
    """Artifacts a compile may log several times (recompile reasons, graph breaks)."""
    name = "append"
    names = frozenset({"artifact:recompile_reasons", "artifact:dynamo_graph_break_reason"})

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]:
        key = env.name.split(":", 1)[1]
        if (env.meta.get("artifact") or {}).get("encoding") == "json":
            data, warn = env.json_payload()
            return [*warn, r.AppendDetail(key, data)]
        return [r.AppendDetail(key, env.payload())]


class DynamoErrorParser(_Parser):
    name = "artifact:dynamo_error"
    names = frozenset({name})

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]:
        return [r.SetDetail("dynamo_error", env.payload()),
                r.SetDetail("dynamo_error_line", env.lineno)]


# the only records read outside a compile
GLOBAL_RECORDS = frozenset({"artifact:torch_version", *vllm.GLOBAL})


class TorchVersionParser(_Parser):
    name = "artifact:torch_version"
    names = frozenset({name})

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]:
        if env.compile_id is not None:
            return []  # skipped inside a compile, as before
        data, warn = env.json_payload()
        out: list[Fact] = list(warn)
        if isinstance(data, dict):
            out.append(r.Version("torch", data.get("pytorch_version") or data.get("version")))
            if data.get("commit"):
                out.append(r.Version("torch_commit", data["commit"]))
        return out


class ChromiumParser(_Parser):
    name = "chromium_event"
    names = frozenset({name})

    def metadata(self, env: Envelope) -> Any:
        ch = env.record.chromium
        if not isinstance(ch, dict) or not isinstance(ch.get("ts"), (int, float)):
            return None
        return ch

    def parse(self, env: Envelope, ch: Any) -> list[Fact]:
        name = str(ch.get("name", ""))
        pass_name = None
        if name.startswith("pass."):
            parts = name.split(".", 2)
            if len(parts) == 3:
                pass_name = (parts[1], parts[2])
        return [r.Chromium(name, ch.get("ph"), ch["ts"] / 1e6, PHASE_OF_EVENT.get(name),
                           pass_name)]


# -- the rest: any artifact, dynamic-shape events, events nothing reads ---------------------------

class ArtifactParser(_Parser):
    name = "artifact"

    def metadata(self, env: Envelope) -> Any:
        return (env.meta.get("artifact") or {}) if env.event == "artifact" else None

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]:
        entry: dict[str, Any] = {"name": env.name.split(":", 1)[1], "line": env.lineno,
                                 "encoding": metadata.get("encoding")}
        return [r.Artifact(entry["name"], entry, env.payload() if env.has_payload else None)]


class DynamicShapeParser(_Parser):
    name = "dynamic_shapes"

    def metadata(self, env: Envelope) -> Any:
        return env.meta if env.event in DYNAMIC_SHAPE_EVENTS else None

    def parse(self, env: Envelope, meta: Any) -> list[Fact]:
        value = meta.get(env.event)
        entry = {"event": env.event, "line": env.lineno}
        if isinstance(value, dict):
            for k, v in value.items():
                if k in ("stack", "user_stack", "frame_locals"):
                    continue
                entry[k] = v
            line = shapes_log.user_line(value.get("user_stack"), env.strings)
            if line:
                entry["user_line"] = line
        return [r.DynamicShape(entry)]


class OtherEventParser(_Parser):
    name = "other"

    def metadata(self, env: Envelope) -> Any:
        return None if env.event in _IGNORED_EVENTS else env.event

    def parse(self, env: Envelope, event: Any) -> list[Fact]:
        return [r.CountEvent(event)]


def _registry() -> r.Registry:
    reg = r.Registry()
    for p in (
        GraphParser("dynamo_output_graph", r.FRAME, "dynamo"),
        GraphParser("artifact:before_pre_grad_graph", r.FRAME, "dynamo", if_missing=True),
        GraphParser("artifact:after_pre_grad_graph", r.FRAME, "pre_grad"),
        GraphParser("aot_joint_graph", r.FRAME, "aot_joint"),
        GraphParser("artifact:before_joint_graph", r.FRAME, "aot_joint", if_missing=True),
        GraphParser("artifact:after_joint_graph", r.FRAME, "joint_graph_passes"),
        # logged before the joint-graph passes: the graph AOTAutograd traced
        GraphParser("aot_inference_graph", r.INFERENCE, "aot_joint", if_missing=True),
        GraphParser("aot_forward_graph", r.FORWARD, "aot_forward"),
        GraphParser("aot_backward_graph", r.BACKWARD, "aot_backward"),
        GraphParser("artifact:before_post_grad_graph", r.SEGMENT, None, if_missing=True),
        GraphParser("artifact:inductor_post_grad_graph", r.SEGMENT, "post_grad",
                    also=("inductor_post_grad_graph",)),
        RunnableParser(), OutputCodeParser(), ProvenanceParser(),
        CacheParser("fx_graph"), CacheParser("aotautograd"),
        DynamoStartParser(), MetricsParser(), GuardsParser(), AppendParser(),
        DynamoErrorParser(), TorchVersionParser(), ChromiumParser(), *vllm.PARSERS,
        ArtifactParser(), DynamicShapeParser(), OtherEventParser(),
    ):
        reg.add(p)
    return reg


REGISTRY = _registry()
# the records whose payload, a big text, is read whole when the record is imported (printed
# graphs, output code, runnable graphs): their checksum is checked as it is read
# (``tracelog.scan``'s ``check_when_read``)
READ_WHOLE = frozenset(n for n, p in REGISTRY.by_name.items()
                       if isinstance(p, (GraphParser, RunnableParser, OutputCodeParser)))
