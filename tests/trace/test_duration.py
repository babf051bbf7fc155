"""The one duration form every view shows (``format_duration``): three significant digits in the
largest unit below the value, a space before the unit, ``—`` for what is not a number."""

from __future__ import annotations

import pytest

from tuidebug.trace.queries.verdict import format_duration


@pytest.mark.parametrize("seconds, text", [
    (3e-6, "3.00 µs"), (1.234e-5, "12.3 µs"), (4.2e-4, "420 µs"),
    (1e-3, "1.00 ms"), (0.0018, "1.80 ms"), (0.53, "530 ms"),
    (0.9996, "1.00 s"),  # rounded before the unit is chosen: not "1000 ms"
    (0.0009996, "1.00 ms"), (12.34, "12.3 s"), (184.2, "184 s"), (0, "0 s"), (-0.0018, "-1.80 ms"),
    (None, "—"), ("1.0", "—"), (True, "—"), (float("nan"), "—"), (float("inf"), "—"),
])
def test_one_duration_form(seconds: object, text: str) -> None:
    assert format_duration(seconds) == text

