"""A static KV cache put in place of Hugging Face transformers' growing one, in this process only
(``tuidebug advise --try`` of the "static KV cache" suggestion): every ``DynamicCache`` the
script or the model builds afterwards is a cache of preallocated layers of a fixed length
(transformers' own ``StaticLayer``), so the script is not edited. A cache built from the model's
config is transformers' ``StaticCache``; one built without a config (``DynamicCache()``) makes
its layers as they are first written, each a ``StaticLayer`` of the same fixed length. What a
transformers release lacks is reported as not available, not worked around."""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
from typing import Any, Iterator

from tuidebug.compiler.compat.lookup import NotAvailable


class NotInTransformers(NotAvailable):
    """A part of transformers that this process's transformers does not have."""

    def __init__(self, what: str) -> None:
        Exception.__init__(self, f"{what} is not available in transformers {_version()}")


def _version() -> str:
    mod = sys.modules.get("transformers")
    return str(getattr(mod, "__version__", "(not installed)"))


def _cache_utils() -> Any:
    try:
        cu = importlib.import_module("transformers.cache_utils")
    except ImportError as e:
        raise NotInTransformers("transformers.cache_utils") from e
    for name in ("Cache", "DynamicCache", "StaticCache", "StaticLayer"):
        if not isinstance(getattr(cu, name, None), type):
            raise NotInTransformers(f"transformers.cache_utils.{name}")
    return cu


def static_cache_class(max_cache_len: int) -> type:
    """A class built as ``DynamicCache`` is built (``DynamicCache()``,
    ``DynamicCache(config=...)``) whose layers are static, ``max_cache_len`` positions each."""
    cu = _cache_utils()
    static, layer, base = cu.StaticCache, cu.StaticLayer, cu.Cache

    class StaticInsteadOfDynamic(static):  # type: ignore[misc, valid-type]
        def __init__(self, ddp_cache_data: Any = None, config: Any = None, *args: Any,
                     **kwargs: Any) -> None:
            if ddp_cache_data is not None:
                raise ValueError("tuidebug advise --try: a DynamicCache built from data cannot "
                                 "be made static")
            if config is not None:
                limit = getattr(config, "max_position_embeddings", None)
                length = min(max_cache_len, limit) if isinstance(limit, int) else max_cache_len
                static.__init__(self, config=config, max_cache_len=length)
            else:  # layers made as first written, each static
                base.__init__(self, layer_class_to_replicate=functools.partial(
                    layer, max_cache_len=max_cache_len))

        def get_mask_sizes(self, *args: Any, **kwargs: Any) -> Any:
            # a layer not made yet will be a static one: its mask spans the whole length
            layer_idx = kwargs.get("layer_idx", args[-1] if args else 0)
            if isinstance(layer_idx, int) and layer_idx >= len(self.layers):
                return max_cache_len, 0
            return super().get_mask_sizes(*args, **kwargs)

    StaticInsteadOfDynamic.__name__ = StaticInsteadOfDynamic.__qualname__ = "StaticCache"
    return StaticInsteadOfDynamic


@contextlib.contextmanager
def static_kv_cache(max_cache_len: int) -> Iterator[None]:
    """Inside the block, ``DynamicCache`` (in ``transformers.cache_utils``, the package face
    and every loaded transformers module that imported it by name) is a static cache of
    ``max_cache_len`` positions; put back after."""
    cu = _cache_utils()
    original = cu.DynamicCache
    replacement = static_cache_class(max_cache_len)
    patched = [mod for name, mod in list(sys.modules.items())
               if mod is not None and (name == "transformers" or name.startswith("transformers."))
               and vars(mod).get("DynamicCache") is original]
    try:
        for mod in patched:
            setattr(mod, "DynamicCache", replacement)
        yield
    finally:
        for mod in patched:
            setattr(mod, "DynamicCache", original)
