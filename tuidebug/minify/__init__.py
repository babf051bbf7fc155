"""Minification: shrink a failed trace into a standalone ``repro.py`` (``tuidebug minify``).

The public API is :func:`minify` (see ``tuidebug.minify.minifier``); importing this package does
not import torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["minify", "MinifyResult", "MinifyError", "Progress"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tuidebug.minify import minifier

        return getattr(minifier, name)
    raise AttributeError(name)
