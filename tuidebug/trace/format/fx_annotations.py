"""FX type annotations (``"f32[3, 16][16, 1]cpu"``, ``"Sym(s77)"``) -> tensor meta. Pure text."""

from __future__ import annotations

import re
from typing import Any

from tuidebug.trace.format import safefile
from tuidebug.trace.format.kernels import split_args

# torch/utils/_dtype_abbrs.py, inverted
_DTYPES = {
    "bf16": "bfloat16", "f64": "float64", "f32": "float32", "f16": "float16",
    "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "f8e4m3fnuz": "float8_e4m3fnuz",
    "f8e5m2fnuz": "float8_e5m2fnuz", "f8e8m0fnu": "float8_e8m0fnu",
    "f4e2m1fn_x2": "float4_e2m1fn_x2",
    "c32": "complex32", "c64": "complex64", "c128": "complex128", "i8": "int8", "i16": "int16",
    "i32": "int32", "i64": "int64", "b8": "bool", "u8": "uint8", "u16": "uint16", "u32": "uint32",
    "u64": "uint64", "bit": "bits8",
}
_ANN_RE = re.compile(r"^(?P<dt>[a-z][a-z0-9_]*)\[(?P<shape>[^\]]*)\](?:\[(?P<stride>[^\]]*)\])?"
                     r"(?P<device>[a-z][\w:]*)?$")
_SYM_RE = re.compile(r"^Sym\((?P<expr>.*)\)$")

_ANN_CACHE: dict[str, dict[str, Any] | None] = {}


def parse_annotation(text: str | None) -> dict[str, Any] | None:
    """``"f32[3, 16][16, 1]cpu"`` -> ``{"dtype": "float32", "shape": [3, 16], ...}``."""
    if not text:
        return None
    # cached and shared between nodes: callers must not modify the dict they get
    got = _ANN_CACHE.get(text, False)
    if got is not False:
        return got  # type: ignore[return-value]
    meta = _parse_annotation(text)
    if len(_ANN_CACHE) < 20000:
        _ANN_CACHE[text] = meta
    return meta


def _parse_annotation(text: str) -> dict[str, Any] | None:
    text = text.strip()
    m = _ANN_RE.match(text)
    if m and m["dt"] in _DTYPES:
        meta: dict[str, Any] = {"dtype": _DTYPES[m["dt"]], "shape": _dims(m["shape"])}
        meta["stride"] = _dims(m["stride"]) if m["stride"] is not None else None
        if m["device"]:
            meta["device"] = m["device"]
        return meta
    s = _SYM_RE.match(text)
    if s:
        expr = s["expr"].strip()
        kind = "symfloat" if re.match(r"^z?f\d", expr) else (
            "symbool" if expr in ("True", "False") else "symint")
        return {"dtype": kind, "shape": [], "value": expr}
    return None


def _dims(text: str) -> list[Any]:
    if not text.strip():
        return []
    if "(" not in text:
        return [_dim(x) for x in text.split(",")]
    return [_dim(x) for x in split_args(text)]  # a size like Max(1, s0) has commas inside


def _dim(s: str) -> Any:
    s = s.strip()
    return safefile.to_int(s, s)

