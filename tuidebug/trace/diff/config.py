"""The two sides of a comparison (path, status, overrides) and their Inductor config's differences."""

from __future__ import annotations

import json
from typing import Any

from tuidebug.trace.format.reader import Trace


def side(t: Trace) -> dict[str, Any]:
    m = t.manifest
    err = t.error
    return {"path": str(t.root), "name": t.name, "status": t.status,
            "torch": m.versions.get("torch"),
            "command": m.command, "config_overrides": m.config_overrides,
            "capture_settings": m.tuidebug_config,
            "recompile": m.recompile,
            "error": err.brief() if err is not None else None}


def config_diff(a: Trace, b: Trace) -> dict[str, Any]:
    va = (a.config.get("values") or {}) if isinstance(a.config, dict) else {}
    vb = (b.config.get("values") or {}) if isinstance(b.config, dict) else {}
    capture: set[str] = set()
    for t in (a, b):
        capture |= set(t.manifest.tuidebug_config)
        capture |= set(t.config.get("set_by_tuidebug") or []) if isinstance(t.config, dict) else set()
    out: dict[str, Any] = {"changed": [], "install_paths": [], "overrides": [],
                           "capture_settings": [], "note": None}
    missing = "_missing_"
    if va and vb:
        for name in sorted(set(va) | set(vb)):
            x, y = va.get(name, missing), vb.get(name, missing)
            if _same_scalar(x, y) or _canon(x) == _canon(y):
                continue
            overridden = name in capture or any(name in t.manifest.config_overrides
                                                 for t in (a, b))
            if not overridden and _same_installed_file(x, y):
                out["install_paths"].append({"name": name, "a": x, "b": y})
            else:
                out["changed"].append({"name": name, "a": None if x is missing else x,
                                       "b": None if y is missing else y,
                                       "capture": name in capture})
    else:
        which = " and ".join(s for s, v in (("A", va), ("B", vb)) if not v)
        out["note"] = (f"config.json missing in {which} (the compile stopped before Inductor "
                       "read its config); compared the --set overrides only")
    oa, ob = a.manifest.config_overrides, b.manifest.config_overrides
    for name in sorted(set(oa) | set(ob)):
        if _canon(oa.get(name, missing)) != _canon(ob.get(name, missing)):
            out["overrides"].append({"name": name, "a": oa.get(name), "b": ob.get(name)})
    ca, cb = a.manifest.tuidebug_config, b.manifest.tuidebug_config
    for name in sorted(set(ca) | set(cb)):
        if _canon(ca.get(name, missing)) != _canon(cb.get(name, missing)):
            out["capture_settings"].append({"name": name, "a": ca.get(name), "b": cb.get(name)})
    return out


_INSTALL_DIRS = ("site-packages", "dist-packages")


def _same_installed_file(x: Any, y: Any) -> bool:
    """Two paths to the same file of two Python installs (torch's own cutlass_dir, made from where
    torch is installed): traces made on two machines or in two venvs differ there by nature."""
    if not (isinstance(x, str) and isinstance(y, str)):
        return False
    tails = []
    for v in (x, y):
        parts = v.replace("\\", "/").split("/")
        where = [i for i, p in enumerate(parts) if p in _INSTALL_DIRS]
        if not where:
            return False
        tails.append(parts[where[-1]:])
    return tails[0] == tails[1]


_SCALARS = (str, int, float, bool, type(None))


def _same_scalar(x: Any, y: Any) -> bool:
    """``x`` and ``y`` are one plain value of one type (most of a config's thousand values),
    known equal without writing both out (1 and True, 1 and 1.0 are not the same value)."""
    return type(x) is type(y) and type(x) in _SCALARS and x == y


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)
