"""A suggestion applied to a traced script without editing its files (``tuidebug advise
--try``): compiler config knobs set in the process, arguments added to every
``torch.compile`` call, inputs marked dynamic by their Dynamo source
(``torch.compiler.config.dynamic_sources``), transformers' growing KV cache built static
(``static_cache``)."""

from __future__ import annotations

import contextlib
import importlib
from typing import Any, Iterator, Mapping

from tuidebug.compiler.compat.lookup import TORCH_VERSION, NotAvailable
from tuidebug.compiler.compat.static_cache import static_kv_cache

# the config modules a suggestion may set a knob of, by the short name it uses
CONFIG_MODULES = {"dynamo": "torch._dynamo.config", "inductor": "torch._inductor.config",
                  "compiler": "torch.compiler.config", "fx": "torch.fx.experimental._config"}


def _config_module(dotted: str) -> tuple[Any, str]:
    short, _, knob = dotted.partition(".")
    if short not in CONFIG_MODULES or not knob:
        raise NotAvailable(f"{dotted}: not a compiler config knob")
    module = importlib.import_module(CONFIG_MODULES[short])
    if not hasattr(module, knob):
        raise NotAvailable(f"{dotted}: not available in torch {TORCH_VERSION}")
    return module, knob


@contextlib.contextmanager
def applied(config: Mapping[str, Any], compile_kwargs: Mapping[str, Any],
            dynamic_sources: list[str], static_cache_len: Any = None) -> Iterator[None]:
    """Everything in force inside the block (``advice.Apply``'s fields); a knob this torch
    (or a static cache this transformers) lacks raises ``NotAvailable`` before anything is
    changed."""
    import torch

    modules = [(*_config_module(k), v) for k, v in config.items()]
    if dynamic_sources:
        modules.append((*_config_module("compiler.dynamic_sources"),
                        ",".join(dynamic_sources)))
    static = None
    if static_cache_len is not None:
        if not isinstance(static_cache_len, int) or isinstance(static_cache_len, bool) \
                or static_cache_len < 1:
            raise ValueError(f"static_cache_len: a positive number of positions, not "
                             f"{static_cache_len!r}")
        static = static_kv_cache(static_cache_len)
    with contextlib.ExitStack() as stack:
        if static is not None:
            stack.enter_context(static)
        for module, knob, value in modules:
            stack.enter_context(module.patch(knob, value))
        if compile_kwargs:
            original = torch.compile

            def compile_with(*args: Any, **kwargs: Any) -> Any:
                return original(*args, **{**kwargs, **compile_kwargs})

            torch.compile = compile_with  # type: ignore[assignment]
            stack.callback(setattr, torch, "compile", original)
        yield
