"""The cross-rank verdict's words (viewers/ranks_view.divergence_lines)."""

from __future__ import annotations

from tuidebug.viewers.ranks_view import divergence_lines


def test_ranks_that_all_failed_alike_agree_but_say_how_they_ended() -> None:
    failed = [{"rank": 0, "status": "script_failed"}, {"rank": 1, "status": "script_failed"}]
    assert divergence_lines(None, failed) == [
        "ranks agree, and every rank ended script_failed"]
    ok = [{"rank": 0, "status": "ok"}, {"rank": 1, "status": "ok"}]
    assert divergence_lines(None, ok) == ["ranks agree"]
    # the same compiles, but one rank was killed: not simply "ranks agree"
    mixed = [{"rank": 0, "status": "ok"}, {"rank": 1, "status": "killed"},
             {"rank": 2, "status": "ok"}]
    assert divergence_lines(None, mixed) == [
        "the ranks' compiles agree, but the ranks ended differently: killed on rank(s) 1, "
        "ok on rank(s) 0,2"]
