"""Which earlier lookup explains a graph-cache miss (trace/cache_keys.explain): the key
components are parsed as torch logs them; the choice of what to compare with is pure logic."""

from __future__ import annotations

from tuidebug.trace.queries.cache_keys import explain, parse_components


def _lookup(cid: str, graph: str, shape: str) -> dict:
    return {"compile_id": cid, "cache": "fx_graph", "result": "miss", "graph_kind": "forward",
            "components": parse_components([
                f"[{graph}] gm: GraphModule()", "[c0nf1g] inductor_config[max_autotune]: False",
                f"[{shape}] example_inputs[0]: TensorMetadata(dtype=torch.float32, "
                f"shape=torch.Size([{shape}, 16]), stride=(16, 1))"])}


def test_another_functions_graph_explains_no_miss() -> None:
    """Function 1's first compile missed because its graph was never cached, not because "the
    FX graph differs" from function 0's; function 0's recompile is compared with its first
    compile; the same graph in another function is compared with (its inputs differ)."""
    got = explain([_lookup("0/0", "g0", "8"), _lookup("1/0", "g1", "8"),
                   _lookup("0/1", "g0", "4"), _lookup("2/0", "g0", "2")])
    assert [x["compared_with"] for x in got] == [None, None, "0/0", "0/1"]
    assert "no earlier lookup of this cache for this graph" in got[1]["miss_reason"][0]
    assert not any("FX graph differs" in r for r in got[1]["miss_reason"])
    assert got[2]["miss_reason"] == ["inputs: arg0 shape [8, 16] → [4, 16]"]
    assert got[3]["miss_reason"] == ["inputs: arg0 shape [4, 16] → [2, 16]"]


def test_thousands_of_lookups_are_explained_without_a_scan_per_lookup() -> None:
    """``info`` explains every miss of a trace: each one used to filter every earlier lookup
    (3,000 lookups: 4.5 million comparisons); earlier lookups are now grouped as they go."""
    import time

    lookups = [_lookup(f"{i}/0", f"g{i}", "8") for i in range(3000)]
    lookups += [_lookup(f"{i}/1", f"g{i}", "4") for i in range(0, 3000, 100)]
    t0 = time.monotonic()
    got = explain(lookups)
    assert time.monotonic() - t0 < 2
    assert all(x["compared_with"] is None for x in got[:3000])
    assert [x["compared_with"] for x in got[3000:]] == [f"{i}/0" for i in range(0, 3000, 100)]
