"""How long the whole suite would take on the CI machine with another xdist worker count or a
file made shorter: a model of a recorded run, not a run.

    .venv/bin/python -m pytest --collect-only -q -p no:cacheprovider > /tmp/collected.txt
    .venv/bin/python bench/ci_schedule.py CPULOG /tmp/collected.txt [--workers 3 4]
        [--cores 2] [--file-wall tests/distributed/test_hangs.py=156]

CPULOG: one line per test of a recorded run, ``nodeid<TAB>wall s<TAB>CPU s`` (its own and its
children's). The order is the one collected (``--dist loadfile --no-loadscope-reorder``: each
file on one worker, handed out in collection order, a worker given its next file when two of
its tests are left, as pytest-xdist's loadscope scheduler does).

The model: the cores are shared fairly (each running test gets at most one core, all of them
``cores`` in all); a test needs its CPU seconds and has a solo time (at least its CPU): the
rest of its solo time it waits (sleeps, timeouts, a hung job, another worker's build). The solo
times are fitted so that the model, replaying the recorded run (its worker count, ``--workers``'
first), gives each test its recorded wall time; then the run is replayed with each worker count.
A test's CPU above 1.2 × its wall (a child reaped at its end: a worker pool's CPU) is spread
over its file's other tests. It ignores what more processes cost each other (caches, memory):
an extra worker's gain is an upper bound; a full run is the measurement.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Cost:
    """One test's CPU seconds and solo seconds (its CPU plus what it waits)."""

    cpu: float
    solo: float


def read_log(path: Path) -> tuple[dict[str, float], dict[str, float]]:
    """nodeid → wall seconds, nodeid → CPU seconds; a CPU above 1.2 × wall spread over the
    file's other tests, in proportion to their wall time left over their CPU."""
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            node, w, c = line.split("\t")
            wall[node], cpu[node] = float(w), float(c)
    excess: dict[str, float] = {}
    for node, c in cpu.items():
        if c > 1.2 * wall[node]:
            f = node.split("::")[0]
            excess[f] = excess.get(f, 0.0) + c - 1.2 * wall[node]
            cpu[node] = 1.2 * wall[node]
    for f, extra in excess.items():
        room = {n: max(0.0, wall[n] - cpu[n]) for n in cpu if n.split("::")[0] == f}
        total = sum(room.values())
        for n, r in room.items():
            cpu[n] += extra * r / total if total else 0.0
    return wall, cpu


def read_order(path: Path) -> list[str]:
    """The nodeids of ``pytest --collect-only -q``'s output, in order."""
    return [ln.strip() for ln in path.read_text().splitlines() if "::" in ln]


def replay(order: list[str], costs: dict[str, Cost], workers: int,
           cores: float = 2.0) -> tuple[float, dict[str, float]]:
    """The run's wall seconds, and each test's, on ``workers`` workers sharing ``cores``."""
    files: dict[str, list[str]] = {}
    for node in order:
        files.setdefault(node.split("::")[0], []).append(node)
    queue = list(files.values())
    pending: dict[int, list[str]] = {k: [] for k in range(workers)}

    def give(k: int) -> None:
        if queue:
            pending[k].extend(queue.pop(0))

    for k in range(workers):
        give(k)
    for k in range(workers):
        if len(pending[k]) <= 2:
            give(k)
    now = 0.0
    running: dict[int, list] = {}  # worker → [node, solo left, CPU share, start]
    took: dict[str, float] = {}

    def start(k: int) -> None:
        while pending[k]:
            node = pending[k][0]
            cost = costs.get(node, Cost(0.0, 0.0))
            if cost.solo > 0:
                running[k] = [node, cost.solo, cost.cpu / cost.solo, now]
                return
            took[pending[k].pop(0)] = 0.0
            if len(pending[k]) <= 2:
                give(k)
        running.pop(k, None)

    for k in range(workers):
        start(k)
    while running:
        demand = sum(r[2] for r in running.values())
        speed = 1.0 if demand <= cores else cores / demand
        k = min(running, key=lambda w: running[w][1])
        step = running[k][1] / speed
        now += step
        for r in running.values():
            r[1] -= step * speed
        for w in [w for w, r in running.items() if r[1] <= 1e-9]:
            took[pending[w].pop(0)] = now - running[w][3]
            if len(pending[w]) <= 2:
                give(w)
            start(w)
    return now, took


def fit(order: list[str], wall: dict[str, float], cpu: dict[str, float], workers: int,
        cores: float = 2.0, rounds: int = 30) -> dict[str, Cost]:
    """Solo times such that replaying ``order`` on ``workers`` gives each test its wall."""
    costs = {n: Cost(cpu.get(n, 0.0), max(cpu.get(n, 0.0), 1e-3) if wall.get(n, 0.0) > 0
                     else 0.0) for n in order}
    for _ in range(rounds):
        _, took = replay(order, costs, workers, cores)
        for n, c in costs.items():
            if c.solo > 0 and took[n] > 0:
                speed = c.solo / took[n]
                costs[n] = Cost(c.cpu, max(c.cpu, c.solo + 0.7 * (wall[n] - took[n]) * speed))
    return costs


def with_file_wall(costs: dict[str, Cost], file: str, seconds: float) -> dict[str, Cost]:
    """``file``'s tests as one that takes ``seconds`` solo with the same CPU (its first test
    holding it all: a shared fixture made shorter)."""
    nodes = [n for n in costs if n.split("::")[0] == file]
    if not nodes:
        raise SystemExit(f"no test of {file} in the log")
    out = dict(costs)
    out[nodes[0]] = Cost(sum(costs[n].cpu for n in nodes), max(seconds, 1e-3))
    for n in nodes[1:]:
        out[n] = Cost(0.0, 0.0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cpulog", type=Path)
    ap.add_argument("collected", type=Path)
    ap.add_argument("--workers", type=int, nargs="+", default=[3, 4],
                    help="worker counts; the first is the recorded run's")
    ap.add_argument("--cores", type=float, default=2.0)
    ap.add_argument("--file-wall", action="append", default=[], metavar="FILE=SECONDS",
                    help="a file made to take SECONDS solo (its CPU kept)")
    ns = ap.parse_args()
    wall, cpu = read_log(ns.cpulog)
    order = [n for n in read_order(ns.collected) if n in wall]
    costs = fit(order, wall, cpu, ns.workers[0], ns.cores)
    recorded, _ = replay(order, costs, ns.workers[0], ns.cores)
    print(f"{len(order)} tests, CPU {sum(cpu[n] for n in order):.0f} s (at best "
          f"{sum(cpu[n] for n in order) / ns.cores:.0f} s on {ns.cores:g} cores); the recorded "
          f"run modelled: {recorded:.0f} s on {ns.workers[0]} workers")
    changed = costs
    for item in ns.file_wall:
        file, seconds = item.rsplit("=", 1)
        changed = with_file_wall(changed, file, float(seconds))
    for n in ns.workers:
        line = f"  {n} workers: {replay(order, costs, n, ns.cores)[0]:.0f} s"
        if ns.file_wall:
            line += f", with {', '.join(ns.file_wall)}: {replay(order, changed, n, ns.cores)[0]:.0f} s"
        print(line)


if __name__ == "__main__":
    main()
