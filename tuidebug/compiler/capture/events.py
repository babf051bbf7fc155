"""The structured trace log (the one behind TORCH_TRACE): compile metrics, guards, graph breaks
and recompile reasons (``compiles/<id>.json``), the output code, torch's runnable script and the
pre- to post-grad node mapping of each graph."""

from __future__ import annotations

import logging
from typing import Any

from tuidebug.compiler import compat
from tuidebug.compiler.capture import graphs, kernels
from tuidebug.compiler.capture.state import Concern, LogHandler
from tuidebug.trace.queries.summary import cache_counts

_SUMMARY = ("co_name", "co_filename", "co_firstlineno", "entire_frame_compile_time_s",
            "inductor_compile_time_s", "fail_type")


class Events(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._handler: logging.Handler | None = None

    def install(self, p: compat.Patcher) -> None:
        try:
            logger = compat.structured_trace_logger()
            self._handler = LogHandler(self._on_record, self._on_error)
            logger.addHandler(self._handler)
        except compat.NotAvailable as e:
            assert self.session.writer is not None
            self.session.writer.not_available(
                f"structured events (metrics, guards, output code): {e}")

    def uninstall(self) -> None:
        if self._handler:
            compat.structured_trace_logger().removeHandler(self._handler)

    def _on_record(self, record: logging.LogRecord) -> None:
        event = compat.structured_event(record)
        if event is not None:
            self.on_event(event)

    def _on_error(self, e: Exception) -> None:
        if self.session.writer:
            self.session.writer.warn(f"capture could not record an event: {e}")

    def on_event(self, event: compat.StructuredEvent) -> None:
        s = self.session
        cid, data = event.compile_id, event.data
        if event.kind == "dynamo_start":
            s.phase("dynamo")
            # in the compiling thread, before Dynamo traces: one other than the thread that
            # first reached the compiler would trace with torch's defaults (the config is per
            # thread), a --set of a Dynamo flag left out, until Inductor's compile_fx
            s.config_here()
        elif event.kind == "output_code":
            s.concern(kernels.Kernels).on_output_code(data, s.current())
        elif event.kind in ("metrics", "backward_metrics"):
            self._compile_detail(cid, event.kind, data)
            self._compile_detail(cid, "counters", compat.counters_snapshot())
        elif event.kind in ("guards", "recompile_reasons", "dynamo_graph_break_reason"):
            self._compile_detail(cid, event.kind, data, append=event.kind != "guards")
        elif event.kind == "fx_graph_runnable":
            s.tls.runnable = data
            gs = s.current()
            if gs is not None and gs.has_partition:
                s.concern(graphs.Graphs).write_runnable(gs)
        elif event.kind == "provenance_mappings":
            gs = s.current()
            if gs is not None and isinstance(data, dict):
                gs.pre_to_post = data.get("preToPost") or {}

    def _compile_detail(self, cid: str | None, key: str, value: Any, append: bool = False) -> None:
        if cid is None:
            return
        s = self.session
        with s.lock:
            c = s.compiles.setdefault(cid, {"graphs": []})
            if append:
                c.setdefault(key, []).append(value)
            else:
                c[key] = value
            assert s.writer is not None
            s.writer.write_compile(cid, c)
            # the summary the cross-rank analysis reads instead of this file (tens of KB):
            # the compile's times, and its cache counts, forward and backward
            m = c.get("metrics") if isinstance(c.get("metrics"), dict) else {}
            s.writer.add_compile(cid, {"graphs": c["graphs"], "summary": {
                **{k: m.get(k) for k in _SUMMARY}, "cache": cache_counts(c)}})

