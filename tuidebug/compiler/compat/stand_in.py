"""A function standing in for what ``torch.compile`` returned for a function, that Dynamo cannot
tell from it (``capture/compiled_calls.py``: the user's calls seen, the result unchanged)."""

from __future__ import annotations

from typing import Any, Callable

from tuidebug.compiler.compat.lookup import own_frame_skipped


def stand_in(result: Callable[..., Any], before: Callable[[], Any],
             returned: Callable[[tuple[Any, ...], dict[str, Any], Any, Any], None]
             ) -> Callable[..., Any]:
    """A function calling ``result`` that hands ``returned(args, kwargs, out, before())`` each
    call (``before()`` taken as the call begins), with
    ``result``'s attributes (its name, doc, module and ``__dict__``: ``__wrapped__``, Dynamo's
    ``_torchdynamo_orig_callable`` and ``_torchdynamo_inline``). Dynamo follows
    ``_torchdynamo_orig_callable`` only from a function whose ``_torchdynamo_wrapper_id`` is its
    own id (torch 2.13; earlier ones follow it from any function): the stand-in's is its own,
    so ``torch.compiler.disable`` of it disables the original function, as of ``result``; a
    call of it that Dynamo traces inlines ``_torchdynamo_inline`` (the original), never this
    function."""
    def call(*args: Any, **kwargs: Any) -> Any:
        began = before()
        out = result(*args, **kwargs)
        returned(args, kwargs, out, began)
        return out
    own_frame_skipped(call)  # called from a frame Dynamo runs eagerly: never compiled itself
    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(call, name, getattr(result, name))
        except (AttributeError, TypeError):
            pass
    own = getattr(result, "__dict__", None)
    if isinstance(own, dict):
        call.__dict__.update(own)
        if own.get("_torchdynamo_wrapper_id") == id(result):
            call._torchdynamo_wrapper_id = id(call)  # type: ignore[attr-defined]
    return call
