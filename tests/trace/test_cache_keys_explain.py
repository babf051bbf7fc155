"""Which earlier lookup explains a graph-cache miss (trace/cache_keys.explain): the key
components are parsed as torch logs them; the choice of what to compare with is pure logic."""

from __future__ import annotations

from tuidebug.trace.queries.cache_keys import MAX_VALUE, explain, parse_components


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


def _meta(shape: str, rest: str = "") -> str:
    return (f"TensorMetadata(dtype=torch.float32, shape=torch.Size([{shape}]), "
            f"stride=(1,), device=device(type='cpu'){rest})")


def _inputs_lookup(cid: str, inputs: list[str]) -> dict:
    return {"compile_id": cid, "cache": "fx_graph", "result": "miss", "graph_kind": "inference",
            "components": parse_components(
                ["[g] gm: GraphModule()"]
                + [f"[{hash(v) & 0xffff:x}] example_inputs[{i}]: {v}"
                   for i, v in enumerate(inputs)])}


def test_inputs_added_are_named_not_paired_by_position() -> None:
    """A decode step's graph takes the KV cache as four more inputs (Qwen2 under generate(),
    imported from its TORCH_TRACE log: 31 → 35 inputs): paired by position, every input after
    the first new one read as changed (``arg4 shape [8] → [1, 2, 5, 16]``: the rotary
    frequencies against a cache tensor), 25 lines of differences none of which happened."""
    weights = [_meta("8"), _meta("64"), _meta("64, 64")]
    earlier = [_meta("1, 5")] + weights
    later = [_meta("1, 1"), _meta("1, 2, 5, 16"), _meta("1, 2, 5, 16")] + weights
    got = explain([_inputs_lookup("0/0", earlier), _inputs_lookup("0/1", later)])
    reasons = got[1]["miss_reason"]
    assert got[1]["compared_with"] == "0/0"
    assert reasons == ["inputs: 4 → 6 inputs (the graph takes other inputs: not compared by "
                       "position); only in the later key: 2× float32 [1, 2, 5, 16], "
                       "float32 [1, 1]; only in the earlier key: float32 [1, 5]"], reasons


def test_a_field_cut_from_the_kept_value_is_not_a_difference() -> None:
    """A component's value is kept up to MAX_VALUE characters: a field the cut fell in
    (``is_quantized=…`` against ``is_quantized=False``) is unknown, not changed."""
    pad = ", " + "x" * (MAX_VALUE - 120)
    a = _meta("1, 5", pad + ", requires_grad=False, is_quantized=False")
    b = _meta("1, 6", pad + "xxxxxxxxxxxxxx, requires_grad=False, is_quantized=False")
    got = explain([_inputs_lookup("0/0", [a]), _inputs_lookup("0/1", [b])])
    reasons = got[1]["miss_reason"]
    assert len(reasons) == 1 and reasons[0].startswith("inputs: arg0 shape [1, 5] → [1, 6]"), \
        reasons
    assert "…" not in reasons[0], reasons


def test_a_field_both_keys_cut_at_different_points_is_not_a_difference() -> None:
    """Both values cut inside ``requires_grad=False``, one after ``Fa``, the other after
    ``Fal`` (the text before it one character shorter): the field is unknown on both sides,
    not "requires_grad Fa → Fal"."""
    tail = ", requires_grad=False, is_quantized=False"
    head = len(_meta("1, 5", ", ")) - 1  # the value up to the pad (its closing ")" left out)
    n = MAX_VALUE - head - len(", requires_grad=Fa")  # pad length that cuts after "Fa"
    a = _meta("1, 5", ", " + "x" * n + tail)
    b = _meta("1, 6", ", " + "x" * (n - 1) + tail)
    lookups = [_inputs_lookup("0/0", [a]), _inputs_lookup("0/1", [b])]
    kept = [c["value"] for x in lookups for c in x["components"] if c["name"].startswith("ex")]
    assert [v.rsplit(", ", 1)[-1] for v in kept] == ["requires_grad=Fa…", "requires_grad=Fal…"], \
        kept
    got = explain(lookups)
    reasons = got[1]["miss_reason"]
    assert reasons == ["inputs: arg0 shape [1, 5] → [1, 6]"], reasons
