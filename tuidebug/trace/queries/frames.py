"""Frames Dynamo did not compile, and why (the manifest's ``skipped_frames``: skip files,
tracing disabled, no operations traced, …); and, for a trace that reached no Inductor graph,
what happened instead, in words."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path, PurePath
from typing import Any

from tuidebug.trace.queries.graph_breaks import dynamo_message

MAX_SHOWN = 8  # frames named in the nothing-compiled text
# where torch itself (and Python's runtime) lives: a skip there is Dynamo's own business; and
# tuidebug's own capture (its hooks run inside the user's compiled region: a log record's
# handler), wherever it is installed (an editable install is in no site-packages)
_NOT_OWN = ("/torch/", "/site-packages/", "/dist-packages/", "<frozen ", "/lib/python",
            "/tuidebug/compiler/", "/tuidebug/trace/")
_TUIDEBUG = str(Path(__file__).resolve().parents[2]).replace("\\", "/") + "/"


@dataclass(frozen=True)
class SkippedFrame:
    """A function Dynamo was handed and ran without compiling: ``reason`` in Dynamo's words,
    ``count`` times; ``own``: the user's code (not torch, not an installed package)."""

    function: str
    file: str
    line: int | None
    reason: str
    count: int
    own: bool

    @property
    def where(self) -> str:
        return f"{PurePath(self.file.replace(chr(92), '/')).name}:{self.line or '?'}"

    @property
    def advice(self) -> str | None:
        """What to change, from Dynamo's reason, for the user's own frame (None: nothing the
        reason tells for sure)."""
        if not self.own:
            return None
        if "No ops traced" in self.reason:
            return ("it computes no tensor operation (only Python values): there is nothing for "
                    "torch.compile to compile here; compile the function that does the tensor "
                    "work, or pass tensors")
        return None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "where": self.where, "advice": self.advice}


def is_own(file: str) -> bool:
    path = file.replace("\\", "/")
    return not path.startswith("<") and not path.startswith(_TUIDEBUG) \
        and not any(p in path for p in _NOT_OWN)


def skipped_frames(records: list[dict[str, Any]]) -> list[SkippedFrame]:
    """The frames of the manifest's ``skipped_frames`` records, the user's own first."""
    out = []
    for f in records:
        if not isinstance(f, dict) or not f.get("function"):
            continue
        line = f.get("line")
        file = str(f.get("file") or "?")
        out.append(SkippedFrame(function=str(f["function"]), file=file,
                                line=line if type(line) is int else None,
                                reason=str(f.get("reason") or "?").strip(),
                                count=f["count"] if type(f.get("count")) is int else 1,
                                own=is_own(file)))
    out.sort(key=lambda f: not f.own)
    return out


def _one(f: SkippedFrame) -> str:
    reason = f.reason.splitlines()[0] if f.reason else "?"
    return f"{f.function} ({f.where}): {reason}"


def nothing_compiled(skipped: list[SkippedFrame], compiles: dict[str, dict[str, Any]]) -> str:
    """Why a capture reached no Inductor graph, from what Dynamo did instead: frames it
    compiled without a graph for Inductor, frames it skipped (each with Dynamo's reason), or
    nothing at all (no compiled function was called)."""
    if compiles:
        ids = ", ".join(list(compiles)[:6]) + (" …" if len(compiles) > 6 else "")
        named = {(f.function, f.file) for f in skipped}
        why = []
        for cid, c in list(compiles.items())[:MAX_SHOWN]:
            m = c.get("metrics") or c.get("summary") or {}
            if m.get("fail_type"):
                why.append(f"{cid}: Dynamo gave up ({m.get('fail_type')}: "
                           f"{dynamo_message(str(m.get('fail_reason') or ''))})")
            elif (m.get("co_name"), m.get("co_filename")) in named:  # listed below
                continue
            elif isinstance(m.get("graph_op_count"), int) and m["graph_op_count"] > 0:
                why.append(f"{cid}: no graph for Inductor (a backend other than Inductor: "
                           "backend='eager', 'aot_eager', a custom one)")
            elif m.get("graph_op_count") is None and m.get("co_name"):  # not recorded
                why.append(f"{cid}: no graph for Inductor")
        ops = [(c.get("metrics") or c.get("summary") or {}).get("graph_op_count")
               for c in compiles.values()]
        empty = sum(1 for n in ops if n == 0)
        text = (f"nothing was compiled by Inductor: Dynamo handled {len(compiles)} "
                f"frame{'s' if len(compiles) != 1 else ''} ({ids})"
                + (f": {'; '.join(why)}" if why else "")
                + (f"; {empty} of them traced no tensor operation (a graph with no operation "
                   "goes to no backend)" if empty else ""))
        return text + _ddp(skipped) + (f"; it skipped {_listed(skipped)}" if skipped else "")
    if skipped:
        return ("nothing was compiled: Dynamo was handed frames but compiled none of them"
                + _ddp(skipped) + f"; it skipped {_listed(skipped)}")
    return ("nothing was compiled during the capture: Dynamo was never handed a frame — no "
            "torch.compile'd function was called (torch.compile is lazy), or it had been "
            "compiled before the capture started")


def _ddp(skipped: list[SkippedFrame]) -> str:
    """What Dynamo does with DistributedDataParallel, when it skipped DDP's forward: it does not
    trace DDP's own frames (``_inside_ddp_forward``), and each forward they call is a frame of
    its own — compiled when it is the user's code, skipped when it is torch's own modules."""
    ddp = [f for f in skipped if f.function == "_inside_ddp_forward"
           or (f.function == "forward" and f.file.replace("\\", "/").endswith(
               "nn/parallel/distributed.py"))]
    if not ddp:
        return ""
    inner = [f for f in skipped if f.function == "forward" and "/torch/nn/modules/" in
             f.file.replace("\\", "/")]
    own = [f for f in skipped if f.own]
    return ("; Dynamo does not trace DistributedDataParallel's own frames (its forward, "
            "_inside_ddp_forward); the forwards they call are frames of their own, compiled "
            "when they are your code" + (
                f" — here they are torch's own modules ({', '.join(sorted({f.where for f in inner}))}: "
                "frames in Dynamo's skip files), so they ran eagerly; fix: compile the module "
                "DDP wraps, DDP(torch.compile(model)), or make the module DDP calls one of "
                "your own" if inner and not own else ""))


def _listed(skipped: list[SkippedFrame]) -> str:
    own = [f for f in skipped if f.own]
    shown = (own or skipped)[:MAX_SHOWN]
    rest = len(skipped) - len(shown)
    text = "; ".join(_one(f) for f in shown)
    others = sum(1 for f in skipped if not f.own)
    return (f"{len(skipped)} frame{'s' if len(skipped) != 1 else ''}: {text}"
            + (f"; and {rest} more" + (f" ({others} of torch or an installed package)"
                                       if others else "") if rest else ""))
