"""What a rank said last (``tuidebug.cli.capture_child.run_child``), from a real child process's
stderr: the NCCL watchdog's abort prints its timeout, then c10's ``Exception raised from
checkTimeout …`` and 7 ``frame #N:`` lines, so the last 5 lines were C++ frames and the record's
``last_words`` lost the timeout (the rank read "ended by SIGABRT", not a hang)."""

from __future__ import annotations

import signal
import sys

from tuidebug import proc
from tuidebug.cli.capture_child import run_child
from tuidebug.trace.jobs.ends import collective_timeout_text

# the shape of a real abort (NVIDIA/Megatron-LM#935, sgl-project/sglang#1693; torch 2.4-2.6)
WATCHDOG_ABORT = r"""[rank1]:[E1127 06:40:01.123456 12345 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=10000) ran for 10043 milliseconds before timing out.
[rank1]:[E1127 06:40:01.123789 12345 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at work: 3, last enqueued NCCL work: 3, last completed NCCL work: 2.
[rank1]:[E1127 06:40:01.123801 12345 ProcessGroupNCCL.cpp:630] [Rank 1] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
[rank1]:[E1127 06:40:01.123810 12345 ProcessGroupNCCL.cpp:636] [Rank 1] To avoid data inconsistency, we are taking the entire process down.
terminate called after throwing an instance of 'c10::DistBackendError'
  what():  [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=10000) ran for 10043 milliseconds before timing out.
Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f1c2a96c1b6 in /venv/lib/python3.11/site-packages/torch/lib/libc10.so)
frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x2b4 (0x7f1bd89fec74 in /venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so)
frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x890 (0x7f1bd8a007d0 in /venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so)
frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d (0x7f1bd8a017bd in /venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so)
frame #4: <unknown function> + 0x145c0 (0x7f1c2ae5b5c0 in /venv/lib/python3.11/site-packages/torch/lib/libtorch.so)
frame #5: <unknown function> + 0x94ac3 (0x7f1c2c0d9ac3 in /lib/x86_64-linux-gnu/libc.so.6)
frame #6: clone + 0x44 (0x7f1c2c16aa04 in /lib/x86_64-linux-gnu/libc.so.6)
"""


def test_the_watchdog_timeout_survives_the_cpp_frames_after_it(tmp_path, capfd) -> None:
    """A child that prints a watchdog abort on its stderr and aborts (SIGABRT, as the watchdog
    does): what it said last keeps the timeout line (the ``what():`` one, the last that says
    so) and no ``frame #`` or ``Exception raised from`` line; its own last line is last."""
    script = tmp_path / "abort.py"
    script.write_text(f"import os, sys\nsys.stderr.write({WATCHDOG_ABORT!r})\n"
                      "sys.stderr.write('a last line of the script\\n')\n"
                      "sys.stderr.flush()\nos.abort()\n")
    code, said = run_child([sys.executable, str(script)], proc.child_env())
    assert code == -signal.SIGABRT
    assert "frame #6: clone" in capfd.readouterr().err  # passed through whole
    assert said and said[-1] == "a last line of the script", said
    timeouts = [line for line in said if collective_timeout_text(line)]
    assert timeouts and timeouts[-1].startswith("  what():  [PG ID 0"), said
    assert not [line for line in said if "frame #" in line or "Exception raised" in line], said
    assert len(said) <= 6, said
