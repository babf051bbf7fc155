"""Is a rank slow to compile? Judged over every compile the ranks share (trace/jobs/skew.py):
one compile time per rank is one sample, and no rank is called slow on one sample inside noise
(the cross-rank report said "largest on 0/0: rank 1 … vs rank 0 …" from one number each)."""

from __future__ import annotations

from tuidebug.trace.jobs.skew import judge_skew


def test_one_sample_calls_no_rank_slow_inside_noise() -> None:
    v = judge_skew({0: {"0/0": 10.1}, 1: {"0/0": 12.3}})
    assert v.samples == 1 and v.slow == [], v
    assert v.text.startswith("one sample (compile 0/0): rank 1 12.3 s vs rank 0 10.1 s"), v.text
    assert "cannot tell a slow rank from noise" in v.text
    # however far apart: one number per rank measures no noise
    v = judge_skew({0: {"0/0": 10.0}, 1: {"0/0": 31.0}})
    assert v.slow == [] and v.text.startswith("one sample (compile 0/0): rank 1 31.0 s"), v


def test_a_rank_is_slow_only_when_slower_in_every_shared_compile() -> None:
    steady = {0: {"0/0": 10.0, "1/0": 4.0, "2/0": 6.0},
              1: {"0/0": 16.0, "1/0": 7.0, "2/0": 9.5},
              2: {"0/0": 10.4, "1/0": 4.1, "2/0": 6.2, "3/0": 50.0}}  # 3/0: one rank only
    v = judge_skew(steady)
    assert v.samples == 3 and v.slow == [1], v
    assert v.text.startswith("rank 1 slower in all 3 compiles the ranks share (1.58×–1.75×"), v.text
    # once faster: not consistently slower, whatever the spread in the other compiles
    mixed = {**steady, 1: {**steady[1], "2/0": 5.9}}
    v = judge_skew(mixed)
    assert v.slow == [] and v.text.startswith("no rank slower in all 3 compiles"), v
    assert judge_skew({0: {"0/0": 1.0}}).samples == 0  # one rank: nothing to compare
