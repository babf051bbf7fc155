"""tuidebug: an interactive debugger and visualizer for torch.compile / TorchInductor.

Importing this package is cheap and never imports torch. ``tuidebug.capture`` is resolved lazily
so that viewers (``tuidebug open``) stay torch-free.
"""

from __future__ import annotations

from typing import Any

from tuidebug.version import __version__
__all__ = ["capture", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "capture":
        from tuidebug.compiler.capture import capture

        return capture
    raise AttributeError(f"module 'tuidebug' has no attribute {name!r}")
