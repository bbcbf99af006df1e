"""Assertions the runtime contract suites share."""

from __future__ import annotations

import pytest

from cairn.runtime.errors import is_error


def raises(kind, call, *args, match: str | None = None):
    """`call(*args)` fails with `kind` (or a contract error wrapping it), its message holding `match`."""
    with pytest.raises(Exception) as caught:
        call(*args)
    assert is_error(caught.value, kind), f"{type(caught.value).__name__}: {caught.value}"
    if match is not None:
        assert match in str(caught.value)
    return caught.value


def records_of(store, run_id: str) -> list:
    return store.list_run_records(run_id, "", 1000).events
