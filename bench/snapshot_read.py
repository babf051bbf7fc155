"""What storing snapshots compressed (format 2, ``stages/NNN-<name>.json.gz``) costs a reader.

    .venv/bin/python bench/snapshot_read.py [TRACE] [--rounds N] [--keys]

TRACE (default /tmp/tr24: see bench/tui_open.py) is copied twice into /tmp: once with every
snapshot stored plain, once with every snapshot stored compressed as the writer stores it
(``compressed.pack``). Then, in this one process, rounds alternate between the two copies: each
round opens the trace afresh (``Trace``) and reads every snapshot of its largest graph, in
stage order, as ``n`` through the pass stepper does (``GraphRecord.stage_graph``: read,
decompressed, checked, parsed, the graph built), timing each read in CPU seconds. Prints per
copy the median and the spread (min-max over rounds) of a round and of one snapshot's read, the
ratio compressed/plain per round (median, min-max), and both copies' sizes. The machine's load
average is printed: on a loaded machine compare CPU times and the ratio, not wall.

With ``--keys``, then the keys themselves: the real app (headless, as bench/tui_open.py runs
it, with its ``Keys`` and ``wait_ready``) on each copy in turn, ``n`` through every stage of the
largest graph and ``p`` back, one press at a time, from the press to the stage shown (the
snapshots next to it read ahead in a worker, their CPU counted in the next key's); per copy and
key the median and worst, wall and CPU — twice per copy, the copies alternating.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuidebug.trace.format import atomic, compressed, safefile  # noqa: E402
from tuidebug.trace.format.reader import Trace  # noqa: E402
from tuidebug.machine import cores, load1  # noqa: E402


def copy(src: Path, dst: Path, packed: bool) -> int:
    """``src`` copied to ``dst`` with its snapshots stored plain or compressed; bytes of the
    snapshots in ``dst``."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True)
    total = 0
    for stages in dst.glob("graphs/*/stages"):
        for f in sorted(stages.iterdir()):
            logical = f.with_name(compressed.logical_name(f.name))
            data = compressed.read_bytes(logical, safefile.MAX_JSON_BYTES)
            f.unlink()
            if packed:
                atomic.write_bytes(logical.with_name(compressed.packed_name(logical.name)),
                                   compressed.pack(data))
            else:
                atomic.write_bytes(logical, data)
            total += (logical.with_name(compressed.packed_name(logical.name)) if packed
                      else logical).stat().st_size
    return total


def one_round(root: Path) -> list[float]:
    """CPU seconds of each snapshot read of the largest graph, a fresh ``Trace``."""
    t = Trace(root)
    big = max(t.graphs, key=lambda g: max((s.nodes or 0) for s in g.stages) if g.stages else 0)
    out = []
    for s in big.snapshots():
        if big.is_cached(s):
            continue  # a snapshot stored once for several stages: read once
        c = time.process_time()
        assert big.stage_graph(s) is not None, (root, s.file, t.problems[:3])
        out.append(time.process_time() - c)
    return out


async def stepper_keys(root: Path, label: str, keys: "object") -> None:
    """``n`` through every stage of the largest graph of ``root`` and ``p`` back, timed into
    ``keys`` (a ``tui_open.Keys``) under ``label``."""
    from tui_open import step_stages  # noqa: E402  (bench/, beside this file)

    from tuidebug.tui.app import TuidebugApp

    t = Trace(root)
    big = max(t.graphs, key=lambda g: max((s.nodes or 0) for s in g.stages) if g.stages else 0)
    app = TuidebugApp(t, prewarm=False)
    async with app.run_test(size=(160, 45)) as pilot:
        app.set_graph(big.id)
        await step_stages(app, pilot, keys, len(big.stages), lambda key: f"{key} {label}")


def main() -> int:
    args = sys.argv[1:]
    with_keys = "--keys" in args
    if with_keys:
        args.remove("--keys")
    rounds = 8
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i:i + 2]
    src = Path(args[0] if args else "/tmp/tr24")
    plain, packed = Path(f"/tmp/{src.name}-plain-snapshots"), Path(f"/tmp/{src.name}-gz-snapshots")
    sizes = {"plain": copy(src, plain, False), "compressed": copy(src, packed, True)}
    print(f"{src}: snapshots plain {sizes['plain'] / 1e6:.2f} MB, compressed "
          f"{sizes['compressed'] / 1e6:.2f} MB ({sizes['compressed'] / sizes['plain']:.2f}); "
          f"load average {load1():.2f} on {cores()} cores")
    per: dict[str, list[list[float]]] = {"plain": [], "compressed": []}
    for r in range(rounds):
        order = (("plain", plain), ("compressed", packed))
        for name, root in order if r % 2 == 0 else order[::-1]:
            per[name].append(one_round(root))
    for name, rs in per.items():
        sums = [sum(x) * 1000 for x in rs]
        each = [v * 1000 for x in rs for v in x]
        print(f"  {name:10} a round ({len(rs[0])} snapshots): median {statistics.median(sums):7.1f} "
              f"ms CPU [{min(sums):.1f}-{max(sums):.1f}]; one snapshot: median "
              f"{statistics.median(each):.1f} ms, worst {max(each):.1f} ms")
    ratios = [sum(c) / sum(p) for p, c in zip(per["plain"], per["compressed"])]
    print(f"  compressed/plain per round: median {statistics.median(ratios):.3f} "
          f"[{min(ratios):.3f}-{max(ratios):.3f}] over {rounds} rounds")
    if with_keys:
        import asyncio

        sys.path.insert(0, str(ROOT / "bench"))
        from tui_open import Keys  # noqa: E402

        keys = Keys()
        for r in range(2):
            order = (("(plain)", plain), ("(compressed)", packed))
            for label, root in order if r % 2 == 0 else order[::-1]:
                asyncio.run(stepper_keys(root, label, keys))
        print(f"the pass stepper's keys (load average {load1():.2f}):")
        keys.report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
