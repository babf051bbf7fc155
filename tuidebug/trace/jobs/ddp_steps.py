"""DDP's bucket all-reduces grouped into steps: which step of a rank's log a bucket belongs to,
and why a hang is located in the bucket it is.

DDP's reducer issues one all-reduce per gradient bucket during a backward (bucket 0 first, the
last one marked ``last``) and waits for them all before the backward ends: a bucket of a later
step means every bucket of the earlier ones completed. A rank that hangs waits in the earliest
bucket of its last step that never completed; the ranks parted at that step when another rank
never entered it. Pure data: no torch.
"""

from __future__ import annotations

from typing import Any


def number_step(ddp: dict[str, Any], group: str, steps: dict[str, int],
                 prev: dict[str, dict[str, Any]]) -> None:
    """Put the DDP step of bucket ``ddp`` into it: a new step starts after a bucket marked last,
    or where the bucket index does not grow."""
    before = prev.get(group)
    if before is None:
        steps[group] = 1
    elif before["last"] or ddp["bucket"] <= before["bucket"]:
        steps[group] += 1
    ddp["step"] = steps[group]
    prev[group] = ddp


def step_said(rank: dict[str, Any], c: dict[str, Any], stuck: list[dict[str, Any]]) -> str:
    """Why this DDP bucket: `` — in DDP step 2, where the ranks parted (rank 1 entered step 1
    only): the earliest bucket of that step that never completed``; "" for another
    collective."""
    ddp = c.get("ddp")
    if not ddp or not isinstance(ddp.get("step"), int):
        return ""
    step, group = ddp["step"], c["group"]
    others = {r["rank"]: ((r["progress"].get("collective") or {}).get("ddp_steps") or {})
              .get(group, 0) for r in stuck if r is not rank}
    behind = sorted(rk for rk, n in others.items() if n < step)
    where = (f"where the ranks parted (rank(s) {', '.join(map(str, behind))} entered "
             + (f"step {max(others[rk] for rk in behind)} at most" if any(
                 others[rk] for rk in behind) else "no DDP step") + ")") if behind else \
        "its last"
    return (f" — in DDP step {step}, {where}: the earliest bucket of that step that never "
            "completed (the steps before it completed: the reducer waits for every bucket of a "
            "backward)")
