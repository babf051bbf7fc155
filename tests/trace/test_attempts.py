"""A compile's attempts (``attempts``): the restarts of ``0/1`` are ``0/1_1``, ``0/1_2``…, and
finding them does not walk every compile id (explain, advise and info ask for each compile's
finished attempt: a walk each time made a pass over 2000 compiles quadratic)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tuidebug.trace.queries.attempts import final_attempt, first_attempt, restarts


class _Walked(Mapping[str, Any]):
    """A compiles mapping that counts the walks over its ids."""

    def __init__(self, ids: list[str]) -> None:
        self._d = {i: {} for i in ids}
        self.walks = 0

    def __getitem__(self, key: str) -> Any:
        return self._d[key]

    def __len__(self) -> int:
        return len(self._d)

    def __iter__(self) -> Iterator[str]:
        self.walks += 1
        return iter(self._d)

    def __contains__(self, key: object) -> bool:
        return key in self._d


def test_the_finished_attempt_is_found_without_walking_the_compiles() -> None:
    ids = [f"{i}/{j}" for i in range(400) for j in range(5)]
    ids += ["7/1_1", "7/1_2", "7/1_3", "9/0_1", "9/0_3"]  # 9/0_2 not recorded
    compiles = _Walked(ids)
    checked = 0
    for cid in list(compiles._d):
        want = ({"7/1": "7/1_3", "7/1_1": "7/1_3", "7/1_2": "7/1_3", "7/1_3": "7/1_3",
                 "9/0": "9/0_3", "9/0_1": "9/0_3", "9/0_3": "9/0_3"}).get(cid, cid)
        assert final_attempt(compiles, cid) == want, cid
        checked += 1
    assert checked == len(ids)
    assert compiles.walks == 0, compiles.walks
    assert restarts(compiles, "7/1") == ["7/1_1", "7/1_2", "7/1_3"]
    assert restarts(compiles, "9/0") == ["9/0_1", "9/0_3"]
    assert restarts(compiles, "8/0") == []
    # a plain list of ids is walked, with the same answer
    assert restarts(ids, "9/0") == ["9/0_1", "9/0_3"]
    assert first_attempt("7/1_3") == "7/1" and first_attempt("!0/1/2") == "!0/1/2"


def test_what_is_a_compile_id() -> None:
    from tuidebug.trace.queries.attempts import is_compile_id
    from tuidebug.trace.queries.recompiles import previous_compile

    assert all(is_compile_id(c) for c in ("0/0", "12/3_2", "!0/1/2", "!1/0/0_1"))
    assert not any(is_compile_id(c) for c in ("?", "", None, "x-inference", "0/0 "))
    # a restarted recompile follows the frame's compile before it, whatever its attempt
    compiles = {"0/0": {}, "0/0_1": {}, "0/1": {}, "0/1_1": {}}
    assert previous_compile("0/1_1", compiles) == "0/0" and previous_compile("0/0_1", {}) is None
