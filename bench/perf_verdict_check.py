"""Checks issue 26's GPU criteria from the files bench/perf_gpu.sh writes: three ``trace
--profile`` verdicts of one configuration against each other and against bench/compile_vs_eager.py
(the same verdict; ratios within ±10% of each other and of the bench). Reads ``info --json``
outputs and the bench's JSON lines; prints one line per configuration and PASS/FAIL.

    python bench/perf_verdict_check.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    out = Path(sys.argv[1])
    benches = sorted(out.glob("*.bench.json"))
    if not benches:
        print(f"FAIL: no *.bench.json under {out}: nothing was measured")
        return 1
    ok = True
    for bench in benches:
        name = bench.name[: -len(".bench.json")]
        b = [json.loads(ln) for ln in bench.read_text().splitlines() if ln.startswith("{")]
        traces = []
        for info in sorted(out.glob(f"{name}.run*.info.json")):
            try:
                traces.append(json.loads(info.read_text())["profile"]["verdict"])
            except (KeyError, ValueError) as e:
                print(f"{name}: {info.name} has no verdict ({e})")
                ok = False
        if not b or not traces:
            print(f"{name}: missing bench ({len(b)}) or traces ({len(traces)})")
            ok = False
            continue
        ratios = [t["ratio"] for t in traces]
        verdicts = {t["outcome"] for t in traces}
        ref = b[-1]["ratio"]
        spread = max(ratios) / min(ratios) - 1
        off = max(abs(r / ref - 1) for r in ratios)
        good = len(verdicts) == 1 and spread <= 0.10 and off <= 0.10 and \
            verdicts == {b[-1]["verdict"]}
        ok &= good
        print(f"{name}: traces {', '.join(f'{r:.3f}' for r in ratios)} ({'/'.join(verdicts)}), "
              f"bench {ref:.3f} [{b[-1]['ratio_low']:.3f}–{b[-1]['ratio_high']:.3f}] "
              f"({b[-1]['verdict']}); spread {spread:.1%}, off the bench {off:.1%}: "
              f"{'PASS' if good else 'FAIL'}")
        for t in traces:
            print(f"    {t['text']}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
