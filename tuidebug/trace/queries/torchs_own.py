"""Graph breaks torch makes on purpose, no change of the user's (``GraphBreak.torchs_own``): a
``torch._dynamo.graph_break()`` torch's own code calls (around every optimizer step), and a call
of a function in torch that Dynamo skips where the trace shows the frames it called compiled of
their own. Plain text matching of Dynamo's words; no torch."""

from __future__ import annotations

import re
from typing import Protocol


class Place(Protocol):
    """A place in the code (``graph_breaks.SourceLine``): its file, line and function."""
    @property
    def file(self) -> str: ...

    @property
    def line(self) -> int: ...

    @property
    def fn(self) -> str: ...


# a graph break asked for by a call (Dynamo's graph-break type for it)
_BREAK_CALL = re.compile(r"Call to `torch\._dynamo\.graph_break\(\)`")


# torch as installed (a folder of the user's named torch/ is not it)
_INSTALLED_TORCH = re.compile(r"/(?:site|dist)-packages/torch/")


# a call of a function Dynamo skips, as it names the function and its file
_SKIPPED = re.compile(r"marked as skipped")
_SKIPPED_FN = re.compile(r"the function `(?P<fn>[^`\n]+)` in file `(?P<file>[^`\n]+)`")


def _torch_path(file: str) -> str | None:
    """``torch/optim/optimizer.py`` for a file of torch as installed, else None."""
    parts = _INSTALLED_TORCH.split(file.replace("\\", "/"), 1)
    return "torch/" + parts[1] if len(parts) == 2 else None


def skipped_torch(cause: str, explanation: str | None) -> tuple[str, str] | None:
    """(the function, its file as ``torch/...``) of a call of a function in installed torch
    that Dynamo skips; None for any other break."""
    m = _SKIPPED_FN.search(explanation or "") if _SKIPPED.search(cause) else None
    path = _torch_path(m["file"]) if m else None
    return (m["fn"], path) if m and path else None


def torchs_own_advice(cause: str, explanation: str | None, site: Place | None,
                      entered: tuple[str, ...] = ()) -> str | None:
    """What to do about a break torch makes on purpose (``GraphBreak.torchs_own``): nothing in
    the user's code, said with the place in torch; None for any other break, and for a call of
    a skipped torch function that ``entered`` no compiled frame."""
    if _BREAK_CALL.search(cause) and site and (path := _torch_path(site.file)):
        return (f"nothing in your code: torch itself calls torch._dynamo.graph_break() there "
                f"({path}:{site.line}, in {site.fn}), on purpose"
                + (" (around every optimizer step, so that the step is compiled without grad, "
                   "as a graph of its own)" if path.startswith("torch/optim/") else ""))
    skipped = skipped_torch(cause, explanation) if entered else None
    if skipped:
        shown = ", ".join(entered[:4]) + (f" and {len(entered) - 4} more" if len(entered) > 4
                                          else "")
        return (f"torch skips {skipped[0]} on purpose (its file, {skipped[1]}, is not traced): "
                f"it runs eagerly wherever it is called, and the functions it called were "
                f"compiled as frames of their own ({shown}), so calling it outside the compiled "
                f"function gains nothing (it would leave those uncompiled)")
    return None
