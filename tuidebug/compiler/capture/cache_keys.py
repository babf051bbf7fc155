"""Graph-cache lookups: per Dynamo compile, every lookup of the FX graph cache and the
AOTAutograd cache (hit, miss or bypass), its key and the key's components with a hash each —
``compiles/<id>.cache.json``, what ``trace/cache_keys.py`` compares to say why one missed.

Inductor looks its caches up only when they are on: ``tuidebug trace --use-cache`` (a capture
turns them off otherwise, and then records no lookup)."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from tuidebug.compiler import compat
from tuidebug.compiler.capture.state import Concern, LogHandler
from tuidebug.trace.queries import cache_keys
from tuidebug.trace.format import layout

MAX_LOOKUPS = 200  # per compile: more are counted, not kept


class CacheKeys(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._handler: logging.Handler | None = None
        self._ctx = contextlib.ExitStack()
        self._lookups: dict[str, list[dict[str, Any]]] = {}

    def install(self, p: compat.Patcher) -> None:
        try:
            self._handler = LogHandler(self.on_record, lambda e: self._warn(
                f"capture could not record a graph-cache lookup: {e}"))
            compat.structured_trace_logger().addHandler(self._handler)
        except compat.NotAvailable as e:
            self._handler = None
            self.session.writer.not_available(f"graph-cache lookups: {e}")
            return
        if self.session.use_cache:
            why = self._ctx.enter_context(compat.aot_cache_components())
            if why:
                self._warn(why)

    def uninstall(self) -> None:
        self._ctx.close()
        if self._handler:
            compat.structured_trace_logger().removeHandler(self._handler)

    def _warn(self, msg: str) -> None:
        if self.session.writer:
            self.session.writer.warn(msg)

    def on_record(self, record: logging.LogRecord) -> None:
        lookup = compat.cache_lookup(record)
        if lookup is None:
            return
        meta = getattr(record, "metadata", None) or {}
        cid = layout.compile_id_from_meta(meta) or compat.current_compile_id()
        if cid is None or self.session.writer is None:
            return
        components = cache_keys.parse_components(lookup.pop("components"))
        gs = self.session.current()
        entry = {**lookup, "graph": gs.graph_id if gs is not None else None,
                 "graph_kind": cache_keys.graph_kind(components) if lookup["cache"] == "fx_graph"
                 else None, "components": components}
        with self.session.lock:
            lookups = self._lookups.setdefault(cid, [])
            if len(lookups) >= MAX_LOOKUPS:
                return
            lookups.append(entry)
            self.session.writer.write_compile_cache(cid, lookups)

