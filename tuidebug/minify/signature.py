"""Failure signatures: what must still happen for a candidate to count as the same failure.

A signature is the failure's kind (``compile`` | ``runtime`` | ``accuracy``), the exception type
and the distinctive part of the message, with everything that varies between runs stripped:
file paths, temp-file names, hex addresses, numbers (sizes, line and column numbers, buffer and
kernel indices). For C++/Triton compile errors the compiler's own ``error:`` diagnostics are the
distinctive part (the first line is always just "C++ compile error").

This module is pure Python: the minifier's parent process never imports torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.format.error_record import ErrorRecord

ACCURACY_TYPE = "AccuracyMismatch"
KINDS = ("compile", "runtime", "accuracy")

_QUOTES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "`": "'"})
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\w.~+-]*/)+[\w.+-]+")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_TMP = re.compile(r"\btmp[\w]*")
_NUM = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_SPACE = re.compile(r"\s+")
# gcc/clang: "file.cpp:105:38: error: 'compile' was not declared in this scope"; nvcc/ptxas/triton
# use "error:" too. Warnings and notes are not distinctive.
_DIAG = re.compile(r"(?:^|[\s:])(?:fatal )?error:\s*(?P<msg>.+?)\s*$", re.IGNORECASE)


def phase_kind(phase: str | None) -> str:
    """Map a trace's failure phase (dynamo, lowering, kernel_compile, runtime, …) to a kind."""
    if phase == "runtime":
        return "runtime"
    if phase == "accuracy":
        return "accuracy"
    return "compile"


def short_type(name: str) -> str:
    """``builtins.RuntimeError`` -> ``RuntimeError``; other modules are kept."""
    return name[len("builtins."):] if name.startswith("builtins.") else name


def normalize(text: str) -> str:
    """Strip what varies between runs of the same failure from one line of text."""
    t = text.translate(_QUOTES)
    t = _PATH.sub("<path>", t)
    t = _HEX.sub("<hex>", t)
    t = _TMP.sub("<tmp>", t)
    t = _NUM.sub("N", t)
    return _SPACE.sub(" ", t).strip()[:300]


def diagnostics(text: str) -> frozenset[str]:
    """The normalized ``error:`` lines a compiler printed (empty when there are none)."""
    out = set()
    for line in text.splitlines():
        if "warning:" in line.lower() or "note:" in line.lower():
            continue
        m = _DIAG.search(line)
        if m:
            msg = normalize(m.group("msg"))
            if msg:
                out.add(msg)
    return frozenset(out)


def first_line(text: str) -> str:
    for line in text.splitlines():
        n = normalize(line)
        if n:
            return n
    return ""


@dataclass(frozen=True)
class Signature:
    """The identity of a failure, independent of run-to-run noise."""

    kind: str
    type: str
    key: str = ""
    diags: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_error(cls, kind: str, type_name: str, message: str = "",
                   traceback: str = "") -> "Signature":
        """Build from an exception's kind, qualified type name, message (and traceback)."""
        if kind == "accuracy":
            return cls("accuracy", ACCURACY_TYPE)
        diags = diagnostics(message) or diagnostics(traceback)
        return cls(kind, short_type(type_name), first_line(message), diags)

    @classmethod
    def from_trace_error(cls, error: ErrorRecord) -> "Signature":
        """Build from a failed trace's error (``manifest.json``'s ``error``)."""
        kind = phase_kind(error.phase)
        if error.type == ACCURACY_TYPE:
            kind = "accuracy"
        return cls.from_error(kind, error.type or "?", error.message or "", error.traceback_text)

    @classmethod
    def from_result(cls, result: dict[str, Any]) -> "Signature | None":
        """Build from a candidate's result (see ``repro run()``); None when it did not fail."""
        if result.get("outcome") != "failed":
            return None
        return cls.from_error(str(result.get("kind")), str(result.get("type") or "?"),
                              str(result.get("message") or ""), str(result.get("traceback") or ""))

    def matches(self, other: "Signature | None") -> bool:
        """Does ``other`` (a candidate's failure) count as this failure?"""
        if other is None or other.kind != self.kind or other.type != self.type:
            return False
        if self.kind == "accuracy":
            return True
        if self.diags:
            return bool(self.diags & other.diags)
        return self.key == other.key

    def describe(self) -> str:
        """One line for people: ``compile: CppCompileError: error: 'compile' was not declared…``."""
        if self.kind == "accuracy":
            return "accuracy: compiled output differs from eager"
        detail = sorted(self.diags)[0] if self.diags else self.key
        t = self.type.rsplit(".", 1)[-1]
        return f"{self.kind}: {t}: {detail}" if detail else f"{self.kind}: {t}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "type": self.type, "key": self.key, "diags": sorted(self.diags)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Signature":
        return cls(str(d["kind"]), str(d["type"]), str(d.get("key") or ""),
                   frozenset(d.get("diags") or ()))
