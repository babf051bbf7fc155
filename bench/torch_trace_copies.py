"""Make a big TORCH_TRACE log from a real one: its compiles repeated as new frames.

    .venv/bin/python bench/torch_trace_copies.py REAL.log OUT.log --size-mb 300 [--same-payloads]

Copy ``k`` of the log is the log with every ``frame_id`` moved up by ``k`` times (the largest
frame id + 1), so each copy's compiles are new compiles (``3/0``, ``4/0`` …) of the same model,
as a long job that compiles many frames would log. By default each copy's printed graphs and
output code get one more comment line (``# copy k``, their checksum recomputed), so no payload
of one copy equals another's: an importer that parses each distinct payload once gains nothing
from the repetition. ``--same-payloads`` keeps them byte-identical (the repetition a log has
when the same graph is compiled again). Used by ``bench/import_torch_trace.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

_FRAME = re.compile(rb'"frame_id": (\d+)')
_MD5 = re.compile(rb'"has_payload": "([0-9a-f]*)"')
# the payloads that are printed graphs or code (a trailing comment line keeps them valid)
TEXT_EVENTS = (b'"dynamo_output_graph"', b'"aot_joint_graph"', b'"aot_forward_graph"',
               b'"aot_backward_graph"', b'"aot_inference_graph"', b'"inductor_output_code"',
               b'"inductor_post_grad_graph"', b'"before_pre_grad_graph"',
               b'"after_pre_grad_graph"', b'"before_post_grad_graph"',
               b'"before_joint_graph"', b'"after_joint_graph"', b'"fx_graph_runnable"')


def _records(data: bytes) -> list[tuple[bytes, list[bytes]]]:
    """(header line, payload lines without their tab) of each record."""
    out: list[tuple[bytes, list[bytes]]] = []
    for line in data.split(b"\n"):
        if line.startswith(b"\t") and out:
            out[-1][1].append(line[1:])
        elif line:
            out.append((line, []))
    return out


def write_copies(real: Path, out: Path, size_mb: float, *, same_payloads: bool = False) -> int:
    """Write ``out``: copies of ``real`` until it holds ``size_mb`` MB; returns the copies."""
    data = real.read_bytes()
    records = _records(data)
    frames = [int(m[1]) for m in _FRAME.finditer(data)]
    step = max(frames, default=0) + 1
    copies = max(1, round(size_mb * 1e6 / len(data)))
    tmp = out.with_name(out.name + ".partial")
    with open(tmp, "wb") as f:
        for k in range(copies):
            for header, payload in records:
                if k:
                    header = _FRAME.sub(lambda m: b'"frame_id": %d' % (int(m[1]) + k * step),
                                        header)
                    if not same_payloads and payload and any(e in header for e in TEXT_EVENTS):
                        payload = payload + [b"# copy %d" % k]
                        md5 = hashlib.md5(b"\n".join(payload)).hexdigest().encode()
                        header = _MD5.sub(b'"has_payload": "' + md5 + b'"', header)
                f.write(header + b"\n")
                for line in payload:
                    f.write(b"\t" + line + b"\n")
    tmp.replace(out)
    return copies


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("real", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--size-mb", type=float, required=True)
    ap.add_argument("--same-payloads", action="store_true")
    ns = ap.parse_args()
    n = write_copies(ns.real, ns.out, ns.size_mb, same_payloads=ns.same_payloads)
    print(json.dumps({"copies": n, "bytes": ns.out.stat().st_size}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
