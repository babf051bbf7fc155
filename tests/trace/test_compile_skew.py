"""Is a rank slow to compile? Judged over every compile the ranks share (trace/jobs/skew.py):
one compile time per rank is one sample, and no rank is called slow on one sample inside noise
(the cross-rank report said "largest on 0/0: rank 1 … vs rank 0 …" from one number each)."""

from __future__ import annotations

from tuidebug.trace.jobs.skew import judge_skew


def test_one_sample_calls_no_rank_slow_inside_noise() -> None:
    v = judge_skew({0: {"0/0": 10.1}, 1: {"0/0": 12.3}})
    assert v.samples == 1 and v.slow == [], v
    assert v.text.startswith("one sample (the compile of 0/0): rank 1 12.3 s vs rank 0 10.1 s"), v.text
    assert "cannot tell a slow rank from noise" in v.text
    # however far apart: one number per rank measures no noise
    v = judge_skew({0: {"0/0": 10.0}, 1: {"0/0": 31.0}})
    assert v.slow == [] and v.text.startswith("one sample (the compile of 0/0): rank 1 31.0 s"), v


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


def test_a_compile_read_from_a_cache_on_some_ranks_is_no_sample() -> None:
    """Ranks of one node sharing a cache folder: one compiles, the others read what it wrote.
    The one that compiled is slower in every such compile without being a slow rank."""
    from tuidebug.trace.format.manifest import Manifest
    from tuidebug.trace.jobs.rank_digest import RankDigest
    from tuidebug.trace.jobs.ranks import _by_code

    def rank(r: int, hit: bool, secs: dict[str, float]) -> RankDigest:
        cache = {"fxgraph": {"hit": int(hit), "miss": int(not hit)}}
        compiles = [{"id": cid, "cache": cache if cid != "2/0" else {}, "graphs": []}
                    for cid in secs]
        m = Manifest(compiles=[{"id": cid, "summary": {
            "co_filename": "/job/train.py", "co_name": f"f{cid[0]}", "co_firstlineno": 3}}
            for cid in secs])
        return RankDigest(r, m, "ok", {"compiles": compiles, "hash": str(r)}, secs)  # type: ignore[arg-type]

    digests = {0: rank(0, False, {"0/0": 10.0, "1/0": 8.0, "2/0": 3.0}),
               1: rank(1, True, {"0/0": 2.0, "1/0": 1.5, "2/0": 3.1})}
    times, _ = _by_code(digests)
    key = "f2 (/job/train.py:3)"
    assert times == {0: {key: 3.0}, 1: {key: 3.1}}, times  # 2/0: alike on both ranks
    v = judge_skew({0: {"0/0": 10.0, "1/0": 8.0}, 1: {"0/0": 2.0, "1/0": 1.5}})
    assert v.slow == [0]  # what the times alone would say, cache aside
    assert judge_skew(times).slow == []


def test_a_compile_timed_as_nothing_is_no_sample() -> None:
    v = judge_skew({0: {"0/0": 0.0, "1/0": 4.0}, 1: {"0/0": 3.0, "1/0": 4.1}})
    assert v.samples == 1 and v.slow == [], v
