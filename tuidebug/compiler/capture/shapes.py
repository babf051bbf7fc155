"""Shapes and guards: per Dynamo compile, every symbol (source, hint, value range, backed or
unbacked, the user line that created it), every guard (the guard tree as data, and each guard
on sizes with the user line that added it), every dimension specialized to a constant, and the
input values a recompile's failed guards name — ``compiles/<id>.shapes.json``.

It reads the structured trace log's symbolic-shape records (PyTorch attaches a user stack to
each when the log has a handler, so no ``TORCHDYNAMO_EXTENDED_DEBUG_*`` is needed) and, at the
end of each compile, the ShapeEnv for the final value ranges; each user line gets the source
lines around it (``source_context``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from tuidebug.compiler import compat
from tuidebug.compiler.capture.source_context import add_context
from tuidebug.compiler.capture.state import Concern, LogHandler
from tuidebug.trace.queries import guards as guard_tree
from tuidebug.trace.format import layout

MAX_RECORDS = 2000  # per compile and kind: a compile with more is cut (and says so)


@dataclass
class _Compile:
    env: Any = None  # the ShapeEnv (opaque), held until the compile ends
    symbols: dict[str, dict[str, Any]] = field(default_factory=dict)
    guards: list[dict[str, Any]] = field(default_factory=list)
    specializations: list[dict[str, Any]] = field(default_factory=list)
    tree: str | None = None
    recompile: dict[str, Any] | None = None
    cut: int = 0


class Shapes(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._handler: logging.Handler | None = None
        self._compiles: dict[str, _Compile] = {}

    def install(self, p: compat.Patcher) -> None:
        try:
            self._handler = LogHandler(self.on_record, lambda e: self._warn(
                f"capture could not record a symbol or guard: {e}"))
            compat.structured_trace_logger().addHandler(self._handler)
        except compat.NotAvailable as e:
            self._handler = None
            self.session.writer.not_available(f"symbols and guards: {e}")
        p.wrap(compat.RECOMPILE_REASONS, self._wrap_recompile_reasons)

    def uninstall(self) -> None:
        if self._handler:
            compat.structured_trace_logger().removeHandler(self._handler)

    def stopping(self) -> None:
        for cid in list(self._compiles):
            self.session.guarded("symbols and guards", lambda: self._write(cid))

    def _warn(self, msg: str) -> None:
        if self.session.writer:
            self.session.writer.warn(msg)

    def _compile(self, cid: str) -> _Compile:
        with self.session.lock:
            return self._compiles.setdefault(cid, _Compile())

    # -- the structured log ---------------------------------------------------------------------
    def on_record(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        if not isinstance(meta, dict):
            return
        cid = layout.compile_id_from_meta(meta) or compat.current_compile_id()
        if cid is None:
            return
        if "dynamo_cpp_guards_str" in meta:
            self._compile(cid).tree = str(getattr(record, "payload", "") or "")
            return
        if "compilation_metrics" in meta:  # the compile ended (well or not)
            self._write(cid)
            return
        found = compat.shape_record(record)
        if found is None:
            return
        kind, data = found
        c = self._compile(cid)
        if c.env is None:
            c.env = self.session.guarded("the ShapeEnv", compat.current_shape_env)
        if kind in ("create_symbol", "create_unbacked_symbol"):
            if len(c.symbols) < MAX_RECORDS:
                c.symbols.setdefault(data["symbol"], {
                    "name": data["symbol"], "source": data.get("source"),
                    "kind": "unbacked" if kind == "create_unbacked_symbol" else "backed",
                    "hint": data.get("hint"), "created_range": data.get("range"),
                    "user_line": data.get("user_line")})
            else:
                c.cut += 1
        elif kind == "symbolic_shape_specialization":
            guard = next((g["expr"] for g in reversed(c.guards)
                          if data["symbol"] in g["expr"].replace("(", " ").replace(",", " ")
                          .split()), None)
            c.specializations.append({**data, "guard": guard})
        elif len(c.guards) < MAX_RECORDS:
            c.guards.append({"kind": "SHAPE_ENV" if kind == "guard_added_fast" else
                             "PROPAGATE_REAL_TENSORS", "expr": data["expr"],
                             "user_line": data.get("user_line")})
        else:
            c.cut += 1

    # -- recompiles -----------------------------------------------------------------------------
    def _wrap_recompile_reasons(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def reasons(*args: Any, **kwargs: Any) -> Any:
            out = orig(*args, **kwargs)
            cid = compat.current_compile_id()
            if cid is not None:
                info = s.guarded("the inputs of a recompile",
                                 lambda: compat.recompile_call(args, kwargs, out))
                if info is not None:
                    self._compile(cid).recompile = info
            return out
        return reasons

    # -- the file -------------------------------------------------------------------------------
    def _write(self, cid: str) -> None:
        with self.session.lock:
            c = self._compiles.pop(cid, None)
        if c is None or self.session.writer is None:
            return
        final = self.session.guarded("the ShapeEnv's ranges",
                                     lambda: compat.shape_env_symbols(c.env)) or {}
        c.env = None
        symbols = []
        for name, facts in final.items():
            sym = c.symbols.get(name) or {"name": name, "source": None, "kind": (
                "unbacked" if name.startswith("u") else "backed"), "hint": None,
                "created_range": None, "user_line": None}
            symbols.append(_with_range(sym, facts))
        symbols += [s for n, s in c.symbols.items() if n not in final]
        tree, dropped = guard_tree.parse_guard_tree(c.tree or "")
        sources = {s["name"]: s["source"] for s in symbols if s.get("source")}
        shape_guards = [{**g, "source": _first_source(g["expr"], sources)} for g in c.guards]
        data = {"symbols": symbols, "guards": tree + shape_guards,
                "specializations": [_specialization(sp) for sp in c.specializations],
                "guard_tree": c.tree is not None, "recompile": c.recompile,
                "cut": c.cut + dropped}
        self.session.guarded("the source around user lines", lambda: add_context(data))
        self.session.writer.write_compile_shapes(cid, data)


def _with_range(sym: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    lower, upper = facts.get("lower"), facts.get("upper")
    return {**sym, "sources": facts.get("sources") or ([sym["source"]] if sym.get("source")
                                                       else []),
            "source": sym.get("source") or next(iter(facts.get("sources") or []), None),
            "hint": sym.get("hint") if sym.get("hint") is not None else facts.get("hint"),
            "lower": lower, "upper": upper,
            "range": guard_tree.render_range(sym["name"], lower, upper),
            "replaced_by": facts.get("replaced_by")}


def _first_source(expr: str, sources: dict[str, str]) -> str | None:
    for token in expr.replace("(", " ").replace(")", " ").replace(",", " ").split():
        if token in sources:
            return sources[token]
    return None


def _specialization(sp: dict[str, Any]) -> dict[str, Any]:
    sources = sp.get("sources") or []
    return {"symbol": sp.get("symbol"), "source": sources[0] if sources else None,
            "sources": sources, "value": sp.get("value"), "reason": sp.get("reason"),
            "guard": sp.get("guard"), "user_line": sp.get("user_line")}

