"""A warm worker process: imports torch once, then tests many candidate scripts.

Protocol (``tuidebug.proc``'s JSON lines): the worker sends ``{"event": "ready", ...}`` once
torch and Inductor are imported, then answers each request ``{"op": "run", "id": N, "path":
FILE, "bisect_dir": DIR?}`` read from stdin with ``{"event": "result", "id": N, "result": {...}}``
— the dict the candidate's ``run()`` returned (see ``codegen``), plus ``seconds``; it stops on
``{"op": "exit"}`` or at the end of stdin. Anything torch or the candidate prints goes to stderr
(the worker's log), never into the protocol stream.

Only the minifier starts this, and only on candidate scripts it generated itself.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import traceback
from typing import Any

from tuidebug import proc


def run_candidate(path: str, index: int, bisect_dir: str | None = None) -> dict[str, Any]:
    """Load the candidate script at ``path`` as a module and call its ``run()``.

    With ``bisect_dir`` the run happens under Inductor's compiler bisector, whose state (which
    backend / subsystem / range is being tested) the parent keeps in that directory.
    """
    from tuidebug.compiler import compat

    compat.reset_dynamo()
    t0 = time.perf_counter()
    if bisect_dir:
        compat.begin_bisect_run(bisect_dir)
    try:
        spec = importlib.util.spec_from_file_location(f"_tuidebug_candidate_{index}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        result = dict(module.run())
    except Exception as e:  # the candidate's own harness failed: not a reproduction
        result = {"outcome": "error", "type": f"{type(e).__module__}.{type(e).__qualname__}",
                  "message": str(e)[:4000], "traceback": traceback.format_exc()[-4000:]}
    finally:
        if bisect_dir:
            compat.end_bisect_run()
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


def main() -> int:
    out, _ = proc.protocol_stream()  # torch, g++ and candidates print to the log, not the protocol
    t0 = time.perf_counter()
    import torch

    from tuidebug.compiler import compat

    compat.import_compile_stack()  # the expensive part, done once
    proc.write_message(out, {"event": "ready", "pid": os.getpid(), "torch": torch.__version__,
                             "import_s": round(time.perf_counter() - t0, 3)})
    for index, line in enumerate(sys.stdin):
        if not line.strip():
            continue
        try:
            req = proc.decode(line)
        except proc.ProtocolError as e:
            print(f"[tuidebug worker] {e}", file=sys.stderr, flush=True)
            continue
        if req.get("op") == "exit":
            break
        print(f"[tuidebug worker] candidate {req.get('id')}: {req.get('path')}", file=sys.stderr,
              flush=True)
        result = run_candidate(str(req["path"]), index, req.get("bisect_dir"))
        proc.write_message(out, {"event": "result", "id": req.get("id"), "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
