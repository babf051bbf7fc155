"""The ledger states each part as its share of the clocked call it was measured in, scaled to
the timed calls' median: clocked calls slower (or faster) than the timed ones still split the
measured wall time as they split their own (compiler/capture/whole_call.py ``shares``)."""

from __future__ import annotations

from tuidebug.compiler.capture.call_parts import shares


def _call(scale: float, rest: float) -> tuple[float, list[tuple[str, str, str, str, float]]]:
    """A clocked call of 1 ms × ``scale``: Dynamo 10%, a graph 50%, an island 30%, a graph 10%
    less ``rest`` (the time no mark covers)."""
    wall = 1e-3 * scale
    parts = [("dynamo", "", "", "fwd", 0.1 * wall), ("graph", "g0", "0/0", "fwd", 0.5 * wall),
             ("eager_island", "", "0/0", "fwd", 0.3 * wall),
             ("graph", "g1", "0/1", "fwd", (0.1 - rest) * wall)]
    return wall, parts


def test_slower_clocked_calls_split_the_timed_wall_by_their_shares() -> None:
    # clocked calls twice as slow as the timed median (0.5 ms): in seconds their parts would
    # add up to 2 ms, the remainder -1.5 ms; as shares they add up to the 0.5 ms measured
    runs = [_call(2.0 + 0.01 * i, rest=0.02) for i in range(20)]
    got = shares(runs, 0.5e-3)
    assert [k for k, _ in got] == [("dynamo", "", "", "fwd"), ("graph", "g0", "0/0", "fwd"),
                                   ("eager_island", "", "0/0", "fwd"),
                                   ("graph", "g1", "0/1", "fwd")]
    secs = [s for _, s in got]
    assert abs(secs[1] - 0.25e-3) < 1e-12 and abs(secs[2] - 0.15e-3) < 1e-12
    other = 0.5e-3 - sum(secs)
    assert abs(other - 0.02 * 0.5e-3) < 1e-12  # the clocked calls' own unmarked 2%


def test_only_calls_of_the_usual_shape_count_and_none_gives_nothing() -> None:
    runs = [_call(1.0, rest=0.0) for _ in range(9)]
    odd_wall, odd = _call(1.0, rest=0.0)
    runs.append((odd_wall, odd[:2]))  # a call that took another path (a recompile, say)
    got = shares(runs, 1e-3)
    assert len(got) == 4 and abs(sum(s for _, s in got) - 1e-3) < 1e-12
    assert shares([], 1e-3) == [] and shares([(0.0, [])], 1e-3) == []
