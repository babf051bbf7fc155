"""bench/ci_schedule.py models a recorded run on other worker counts: fitted, it gives each
test its recorded wall; CPU-bound files gain nothing from more workers than cores, a file that
waits is filled in by a further worker or by being made shorter."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from ci_schedule import fit, read_log, read_order, replay, with_file_wall  # noqa: E402


def _log(tmp_path: Path, rows: list[tuple[str, float, float]]) -> tuple[Path, Path]:
    log = tmp_path / "cpulog.tsv"
    log.write_text("".join(f"{n}\t{w}\t{c}\n" for n, w, c in rows))
    collected = tmp_path / "collected.txt"
    collected.write_text("".join(f"{n}\n" for n, _, _ in rows) + f"\n{len(rows)} tests collected\n")
    return log, collected


def test_cpu_bound_files_are_never_sooner_than_their_cpu_over_the_cores(tmp_path) -> None:
    # four files of 100 CPU seconds each, recorded on 2 workers and 2 cores: 200 s
    rows = [(f"tests/test_{i}.py::test_a", 100.0, 100.0) for i in range(4)]
    wall, cpu = read_log(_log(tmp_path, rows)[0])
    order = read_order(_log(tmp_path, rows)[1])
    assert order == [n for n, _, _ in rows]
    costs = fit(order, wall, cpu, workers=2)
    span, took = replay(order, costs, 2)
    assert abs(span - 200) < 1 and all(abs(took[n] - 100) < 1 for n in order), took
    # more workers share the same two cores: never sooner (on 3, the fourth file runs alone on
    # one core at the end: one test uses one core at most)
    assert abs(replay(order, costs, 3)[0] - 250) < 1
    assert abs(replay(order, costs, 4)[0] - 200) < 1


def test_a_waiting_file_is_filled_in_by_another_worker_or_made_shorter(tmp_path) -> None:
    # a file that waits 300 s (1 s of CPU), then four files of 100 CPU seconds: on 2 workers
    # the waiting file holds one worker and the other does the four files alone (400 s). The
    # waiting file has three tests: a worker given a file of two tests or fewer is given the
    # next file at once (xdist's loadscope), which would wait behind it
    rows = [("tests/test_waits.py::test_hang", 300.0, 1.0),
            ("tests/test_waits.py::test_b", 0.1, 0.05), ("tests/test_waits.py::test_c", 0.1, 0.05)]
    rows += [(f"tests/test_{i}.py::test_a", 100.0, 100.0) for i in range(4)]
    log, collected = _log(tmp_path, rows)
    wall, cpu = read_log(log)
    order = read_order(collected)
    costs = fit(order, wall, cpu, workers=2)
    span, took = replay(order, costs, 2)
    assert abs(span - 400) < 2, span
    assert all(abs(took[n] - wall[n]) < 2 for n in order), (took, wall)
    assert costs[order[0]].solo > 290 and costs[order[0]].cpu == 1.0
    # a third worker runs the CPU files on both cores while the first waits
    assert abs(replay(order, costs, 3)[0] - 300.2) < 2
    # the waiting file made to take 50 s (its first test holds it all, the two others end at
    # once): its worker is given the two CPU files left, the other one already had its second
    shorter = with_file_wall(costs, "tests/test_waits.py", 50.0)
    assert abs(replay(order, shorter, 2)[0] - 250) < 2


def test_cpu_a_child_leaves_at_its_tests_end_is_spread_over_its_file(tmp_path) -> None:
    # a worker pool reaped by the last test: 81 CPU seconds in 0.1 s of wall
    rows = [("tests/test_f.py::test_a", 50.0, 5.0), ("tests/test_f.py::test_b", 30.0, 5.0),
            ("tests/test_f.py::test_c", 0.1, 81.0)]
    wall, cpu = read_log(_log(tmp_path, rows)[0])
    assert abs(sum(cpu.values()) - 91.0) < 1e-6
    assert cpu["tests/test_f.py::test_c"] <= 0.12 + 1e-9
    assert cpu["tests/test_f.py::test_a"] > cpu["tests/test_f.py::test_b"] > 5.0
