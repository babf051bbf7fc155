"""config.json: the Inductor config in force for the capture's first compile."""

from __future__ import annotations

from typing import Any

from tuidebug.compiler import compat
from tuidebug.compiler.capture.state import Concern

# The settings tuidebug itself needs (written into the trace): kernel provenance
TUIDEBUG_CONFIG = {"trace.provenance_tracking_level": 1}


class Config(Concern):
    """Writes config.json once, from inside the first compile (the graphs concern calls
    ``write`` where a torch.compile mode's own config patches are in force)."""

    written = False

    def write(self) -> None:
        if self.written:
            return
        writer = self.session.writer
        assert writer is not None
        values = compat.inductor_config_values()
        try:
            defaults = compat.inductor_config_defaults()
        except compat.NotAvailable as e:
            writer.warn(f"config defaults: {e}")
            defaults = {}
        changed = {k: {"value": v, "default": defaults[k]} for k, v in values.items()
                   if k in defaults and _jsonish(v) != _jsonish(defaults[k])}
        writer.write_config({
            "values": {k: _jsonish(v) for k, v in values.items()},
            "changed": {k: {"value": _jsonish(d["value"]), "default": _jsonish(d["default"])}
                        for k, d in changed.items()},
            "set_by_tuidebug": sorted(k for k in changed if k in TUIDEBUG_CONFIG
                                      or k in compat.CACHES_OFF),
        })
        self.written = True


def _jsonish(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonish(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonish(x) for k, x in v.items()}
    return repr(v)
