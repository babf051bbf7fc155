"""Capture: observe the real Inductor while it compiles, and write a trace directory.

``with tuidebug.capture("DIR"): ...`` records every ``torch.compile`` (Inductor backend) made
inside the block. The observers are wrappers installed on Inductor's own functions (named in
``compat``, which also tells what each call was about, as plain data) plus a handler on the
structured trace log (the one behind TORCH_TRACE); they record and never change what the
compiler does, except for two config settings that tuidebug needs and writes into the trace:
``trace.provenance_tracking_level=1`` (kernel provenance) and, unless ``use_cache=True``, the
graph-level caches off (``compat.CACHES_OFF``: the FX graph cache, the AOTAutograd cache,
Dynamo's local PGO — a hit would skip the work a trace records; the kernel code cache stays on).

A thin session (``session.py``) holds what is shared; each concern is a module with its hooks
(``session.CONCERNS`` lists them): ``config``, ``graphs`` (graphs, stages, passes), ``fusion``
(IR and fusion), ``kernels`` (code, provenance, compile and run times), ``autotune``,
``triton`` (launches, config benchmarks, CUDA graph skips), ``outcome`` (errors, the eager
comparison), ``events`` (the structured log). Everything is written through
``tuidebug.trace.format.writer``.
"""

from tuidebug.compiler.capture.config import TUIDEBUG_CONFIG
from tuidebug.compiler.capture.session import NOTHING_COMPILED, CaptureSession, capture

__all__ = ["NOTHING_COMPILED", "TUIDEBUG_CONFIG", "CaptureSession", "capture"]
