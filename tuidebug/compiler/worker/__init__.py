"""The warm recompile worker.

A long-lived server process (``python -m tuidebug.compiler.worker``) imports torch and Inductor
once, warms them up with a small throw-away compile (lazy imports, pattern-matcher tables, the
CPU ISA probe, the C++ compiler's first run), resets Dynamo, and then runs every job in a fresh
child made with ``os.fork()``: each job starts with clean Dynamo state and pays no import or
warm-up cost. A job that crashes (segfault, ``os.abort()``), hangs past its timeout or fails to
compile is reported; the server goes on serving the next job.

The client, :class:`RecompileWorker`, never imports torch (the TUI uses it)::

    w = RecompileWorker(timeout=300).start()
    job = w.submit("traces/mlp", ["max_fusion_size=1"])       # validated against the registry
    job.wait()
    print(job.state, job.out, job.result)                       # "ok", Path(...), JobResult
    w.close()

Callbacks (``on_progress(job, message)``, ``on_done(job)``) run on the client's reader thread; a
Textual app should hand them to its own thread (``App.call_from_thread``).

Modules: ``job`` and ``client`` (torch-free), ``server``, ``child`` (one job's process) and
``warmup`` (these import torch). Protocol: ``tuidebug.proc``'s JSON lines. Client → server
``{"op": "job", "id", "spec"}``, ``{"op": "cancel", "id"}``, ``{"op": "ping"}``, ``{"op":
"exit"}``. Server → client ``{"event": "hello"}``, ``{"event":
"ready", "torch", "cuda", "import_s", "warmup_s"}``, ``{"event": "started", "id", "pid"}``,
``{"event": "progress", "id", "message"}``, ``{"event": "phase", "id", "phase", "graph"}``,
``{"event": "output", "id", "line"}``, ``{"event": "done", "id", "result"}`` (a
``job_result.JobResult``), ``{"event": "pong"}``,
``{"event": "log", "message"}``. A job → the server, on its message pipe: ``{"event":
"progress", "message"}``, ``{"event": "phase", "phase", "graph"}``.
"""

from tuidebug.compiler.worker.client import RecompileWorker
from tuidebug.compiler.worker.job import JOB_STATES, RecompileJob, WorkerError
from tuidebug.compiler.worker.job_result import JobResult

__all__ = ["RecompileWorker", "RecompileJob", "JobResult", "WorkerError", "JOB_STATES"]
