"""A tensor's version counter (``Tensor._version``, private): autograd bumps it at each write
in place, and the whole call's put-back (``capture.call_state.Rewound``) tells from it what a
re-run wrote."""

from __future__ import annotations

from typing import Any


def version_counter(t: Any) -> int | None:
    """The tensor's version counter; None where it has none (an inference tensor) or where
    this torch does not expose it (then what the tensor holds is compared instead)."""
    if t.is_inference():
        return None
    try:
        version = getattr(t, "_version", None)
    except RuntimeError:  # "Inference tensors do not track version counter", and kin
        return None
    return version if isinstance(version, int) else None
