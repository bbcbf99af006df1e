"""Seed commands and pages measured as goa-ai's Go runtime encodes them (`json.Marshal`).

The size limits are on that encoding, so a command one byte over the limit
in Go must be one byte over here too.
"""

from __future__ import annotations

import json

import pytest

from cairn.runtime.model import (
    MAX_SEED_PAGE_BYTES,
    HistoryPrefix,
    LiteralPart,
    SeedPage,
    SeedRecord,
)
from cairn.runtime.seed_checks import go_page, go_raw, go_record, go_string, page_bytes


def test_a_whole_literal_record_encodes_as_goa_ai_documents():
    record = SeedRecord(key="first", previous_id="0", messages=b"[]")
    assert go_record(record) == b'{"ID":"","Key":"first","PreviousID":"0","Messages":[],"Prefix":null,"Prepared":null}'


def test_literal_parts_prefixes_and_prepared_bytes():
    part = SeedRecord(key="k", previous_id="0", literal_part=LiteralPart(b"[", False))
    assert b'"literal_part":{"Data":"Ww==","Final":false}' in go_record(part)
    prefix = SeedRecord(key="k", previous_id="0", prefix=HistoryPrefix("run", "7", True, False))
    assert b'"Prefix":{"RunID":"run","EndID":"7","ExcludeSystem":true,"ExcludeReasoning":false}' in go_record(prefix)
    assert go_record(SeedRecord(key="k", previous_id="0", prepared=b"{}")).endswith(b'"Prepared":"e30="}')


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("plain", b'"plain"'),
        ("<a&b>", b'"\\u003ca\\u0026b\\u003e"'),
        ('q"\\', b'"q\\"\\\\"'),
        ("\n\t\x01\u2028", b'"\\n\\t\\u0001\\u2028"'),
        ("雪", '"雪"'.encode()),
    ],
)
def test_strings_use_gos_html_safe_escapes(text, encoded):
    assert go_string(text) == encoded


def test_raw_messages_are_compacted_with_html_escapes():
    assert go_raw(b'[ {"a" : "x y<"} ,\n 1 ]') == b'[{"a":"x y\\u003c"},1]'
    assert go_raw(b'["\\" \\\\ "]') == b'["\\" \\\\ "]'


def test_page_size_is_counted_without_encoding_the_page_again():
    records = [
        SeedRecord(key=f"k{index}", previous_id=str(index), id=str(index + 1), messages=b'["x"]') for index in range(3)
    ]
    for count in (1, 2, 3):
        page = SeedPage(records=records[:count], next_cursor=records[count - 1].id)
        encoded = sum(len(go_record(record)) for record in records[:count])
        assert page_bytes(encoded, count, page.next_cursor) == len(go_page(page))
        assert json.loads(go_page(page))["NextCursor"] == page.next_cursor


def test_the_page_limit_is_goa_ais():
    assert MAX_SEED_PAGE_BYTES == 1_000_045
