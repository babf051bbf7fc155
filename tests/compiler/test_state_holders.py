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
