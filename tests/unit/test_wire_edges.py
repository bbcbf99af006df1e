"""Inputs the fuzzer found that once answered 500 or off-schema: now a refusal or RFC 3339."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cairn.runtime import wire
from cairn.transcript import exactjson


def test_base64_with_text_that_is_not_ascii_is_refused():
    with pytest.raises(wire.WireError, match="is not base64"):
        wire.decode(bytes, "é30=")
    with pytest.raises(exactjson.JsonError):
        exactjson.b64decode("é30=")


@pytest.mark.parametrize("text", ["0001-01-01T00:00:00+04:00", "9999-12-31T23:59:59-01:00"])
def test_a_time_that_leaves_the_calendar_in_utc_is_refused(text: str):
    with pytest.raises(wire.WireError, match="out of range"):
        wire.decode(datetime, text)


def test_years_before_1000_keep_four_digits():
    assert wire.format_time(datetime(703, 10, 28, 5, 52, 48, 30000, tzinfo=UTC)) == "0703-10-28T05:52:48.030Z"
    assert wire.format_time(datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)) == "2026-01-02T03:04:05.123456Z"
