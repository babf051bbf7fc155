"""The graph caches' lookups, as plain data: what the FX graph cache and the AOTAutograd cache
logged about each lookup (hit, miss or bypass, the key, and the key's components — each
``[hash] name: value``, one per entry of FxGraphHashDetails / AOTAutogradCacheDetails).

Inductor logs them as structured-log artifacts ``fx_graph_cache_<state>`` and
``aotautograd_cache_<state>`` (torch 2.5 onwards) with a JSON payload. The AOTAutograd cache
computes its components only when its logger is enabled for DEBUG (so torch 2.13 does);
``aot_cache_components()`` enables it for the capture without letting the lines it now logs
reach any handler the user did not ask for.
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any, Iterator

from tuidebug.compiler.compat.lookup import TORCH_VERSION

CACHES = {"fx_graph_cache": "fx_graph", "aotautograd_cache": "aotautograd"}
STATES = ("hit", "miss", "bypass")
_AOT_CACHE_LOGGER = "torch._functorch._aot_autograd.autograd_cache"


def cache_lookup(record: logging.LogRecord) -> dict[str, Any] | None:
    """A structured-log record of a graph-cache lookup: ``{cache, result, key,
    bypass_reason, detailed, components}`` (components: the key's ``[hash] name: value``
    strings, empty when torch did not log them); None for any other record."""
    meta = getattr(record, "metadata", None)
    if not isinstance(meta, dict) or not isinstance(meta.get("artifact"), dict):
        return None
    name = str(meta["artifact"].get("name") or "")
    prefix, _, state = name.rpartition("_")
    if prefix not in CACHES or state not in STATES:
        return None
    payload = getattr(record, "payload", None)
    try:
        data = json.loads(payload) if isinstance(payload, str) else payload
    except ValueError:
        data = None
    data = data if isinstance(data, dict) else {}
    components = data.get("components")
    return {"cache": CACHES[prefix], "result": state,
            "key": data.get("key") if isinstance(data.get("key"), str) else None,
            "bypass_reason": data.get("cache_bypass_reason"),
            "detailed": data.get("cache_status_detailed"),
            "components": [str(c) for c in components] if isinstance(components, list) else []}


class _Below(logging.Filter):
    """Drops the records below the level the logger had before capture lowered it."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level


@contextlib.contextmanager
def aot_cache_components() -> Iterator[str | None]:
    """While open, the AOTAutograd cache computes (and logs) its key's components; yields None,
    or why it cannot on this torch. The lines it logs below the logger's former level reach no
    handler."""
    logger = logging.getLogger(_AOT_CACHE_LOGGER)
    if logger.isEnabledFor(logging.DEBUG):
        yield None
        return
    try:
        from torch._functorch._aot_autograd import autograd_cache  # noqa: F401
    except ImportError:
        yield f"the AOTAutograd cache's components: not available in torch {TORCH_VERSION}"
        return
    old, drop = logger.level, _Below(logger.getEffectiveLevel())
    logger.addFilter(drop)
    logger.setLevel(logging.DEBUG)
    try:
        yield None
    finally:
        logger.setLevel(old)
        logger.removeFilter(drop)
