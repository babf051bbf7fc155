"""``python -m tuidebug.compiler.worker --serve``: the warm worker's server process (and, with
``--job``, one job spawned in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import signal
import sys

from tuidebug import proc


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="tuidebug-worker")
    ap.add_argument("--serve", action="store_true", help="serve jobs on stdin/stdout (JSON lines)")
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--job", help=argparse.SUPPRESS)  # a spawned job: its spec as JSON
    ap.add_argument("--msg-fd", type=int, help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    if ns.job:
        from tuidebug.compiler.recompile_spec import RecompileSpec
        from tuidebug.compiler.worker.child import job_main

        return job_main(RecompileSpec.from_json(json.loads(ns.job)), ns.msg_fd)
    if not ns.serve:
        ap.print_help()
        return 2
    # torch.cuda.is_available() through NVML: without this it initialises the CUDA driver in
    # the server, and a forked job could not use CUDA ("Cannot re-initialize CUDA in forked
    # subprocess").
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    # The protocol gets its own copy of stdout: what the server's libraries print cannot corrupt it.
    proto, proto_fd = proc.protocol_stream()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the client stops us with "exit" or EOF
    from tuidebug.compiler.worker.server import Server

    server = Server(proto, proto_fd, warmup=not ns.no_warmup)
    server.send({"event": "hello", "pid": os.getpid()})
    server.boot()
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
