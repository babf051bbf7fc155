"""Checks issue 26's GPU criteria from the files bench/perf_gpu.sh writes: three ``trace
--profile`` verdicts of one configuration against each other and against bench/compile_vs_eager.py
(the same verdict; ratios within ±10% of each other and of the bench), and each run's ledger:
the share of the call its marks cover, at least 90%. The ledger is each part's mean share of
the clocked calls scaled to the timed calls' median (profile.json), so the parts never exceed
that median and ``other`` is it less the parts, by construction: neither is a check. Reads ``info --json`` outputs, the runs' profile.json and the bench's JSON lines;
prints each configuration's verdicts, bench ratio and ledgers, then PASS/FAIL.

    python bench/perf_verdict_check.py OUT_DIR
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


REST = 0.10  # the ledger's remainder, at most this share of the measured wall time


def measured_wall(path: Path) -> float | None:
    """The timed compiled calls' median (profile.json's ``calls[0].times.compiled_s``): what
    the ledger's shares are scaled to."""
    try:
        times = json.loads(path.read_text())["calls"][0]["times"]["compiled_s"]
        return statistics.median(float(t) for t in times)
    except (OSError, ValueError, KeyError, IndexError, TypeError, statistics.StatisticsError):
        return None


def print_ledger(ledger: list[dict], wall: float | None) -> bool:
    """One line per part (seconds per call, share of the measured wall), then what the marked
    parts cover of it; whether they cover at least 1 - ``REST`` of it."""
    if not ledger or wall is None or wall <= 0:
        print(f"        {'no ledger' if not ledger else 'no timed calls in profile.json'}: FAIL")
        return False
    for p in ledger:
        where = " ".join(str(p[k]) for k in ("graph", "reason") if p.get(k))[:90]
        phase = " (bwd)" if p.get("phase") == "bwd" else ""
        print(f"        {p['part']:<13}{phase:<6} {p['seconds'] * 1e6:10.1f} us "
              f"{p['seconds'] / wall:7.1%}  {where}")
    covered = sum(p["seconds"] for p in ledger if p["part"] != "other")
    good = (1 - REST) * wall <= covered and all(
        p["seconds"] >= 0 for p in ledger if p["part"] != "other")
    print(f"        the marked parts {covered * 1e6:.1f} us of the measured {wall * 1e6:.1f} us "
          f"(the timed calls' median): {covered / wall:.1%}: {'PASS' if good else 'FAIL'}")
    return good


def clocked_calls(path: Path) -> str:
    """What the ledger's clocked calls took (profile.json's ``ledger_calls``), if recorded."""
    try:
        calls = json.loads(path.read_text())["calls"]
        lc = calls[0]["ledger_calls"]
        w = lc["wall"]
        return (f"{lc['n']} clocked calls: median {w['median_s'] * 1e6:.1f} us "
                f"(p10 {w['p10_s'] * 1e6:.1f}, p90 {w['p90_s'] * 1e6:.1f})")
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return ""


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
        traces, ledgers = [], []
        for info in sorted(out.glob(f"{name}.run*.info.json")):
            try:
                profile = json.loads(info.read_text())["profile"]
                traces.append(profile["verdict"])
                ledgers.append(profile.get("ledger") or [])
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
        for i, (t, ledger) in enumerate(zip(traces, ledgers), 1):
            print(f"    run {i}: {t['text']}")
            profile = out / f"{name}.run{i}.profile.json"
            clocked = clocked_calls(profile)
            if clocked:
                print(f"        timed calls' median {t['compiled_s'] * 1e6:.1f} us; {clocked}")
            ok &= print_ledger(ledger, measured_wall(profile))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
