"""Which arguments of a compiled call ``--profile`` must not re-run the call on
(``call_state.state_holders``): objects holding tensors the call may change in place or
replace (transformers' KV caches); tensors (copied), and lists, tuples and mappings of them (a
tokenizer's BatchEncoding) are not such."""

from __future__ import annotations

from collections import UserDict

import torch

from tuidebug.compiler.capture.call_state import state_holders as _state_holders


class Layer:
    def __init__(self) -> None:
        self.keys = torch.zeros(1, 2, 4, 8)
        self.cumulative_length = torch.tensor(0)


class Cache:  # the shape of transformers' Cache: layers holding tensors
    def __init__(self) -> None:
        self.layers = [Layer(), Layer()]


class Settings:  # an object holding no tensor: nothing to change
    def __init__(self) -> None:
        self.temperature = 0.7


def test_a_cache_object_is_state_and_tensors_or_their_mappings_are_not() -> None:
    batch = UserDict({"input_ids": torch.ones(1, 3)})  # what transformers' BatchEncoding is
    held = _state_holders((torch.ones(2), batch),
                          {"past_key_values": Cache(), "attention_mask": torch.ones(1, 3),
                           "settings": Settings(), "extra": [torch.ones(1)], "flag": True})
    assert held == ["past_key_values (Cache)"], held
    assert _state_holders((Cache(),), {}) == ["argument 0 (Cache)"]


def test_an_encoder_decoder_cache_is_state() -> None:
    """Whisper's, T5's and BART's ``generate`` pass an ``EncoderDecoderCache``: its tensors lie
    four levels down (cache → self_attention_cache → layers → layer → keys); a search that
    stopped at three levels called it no state, and the timed calls re-ran the whole call on
    the user's cache."""
    import pytest
    cache_utils = pytest.importorskip("transformers.cache_utils")
    cache = cache_utils.EncoderDecoderCache(cache_utils.DynamicCache(),
                                            cache_utils.DynamicCache())
    cache.self_attention_cache.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4), 0)
    assert _state_holders((), {"past_key_values": cache}) == [
        "past_key_values (EncoderDecoderCache)"]


class Node:  # a long chain of objects, deeper than Python's recursion limit
    def __init__(self, below: object) -> None:
        self.below = below


def test_state_deep_down_is_found_without_recursion() -> None:
    chain: object = torch.ones(1)
    for _ in range(3000):
        chain = Node(chain)
    assert _state_holders((chain,), {}) == ["argument 0 (Node)"]
