"""What the state of an address is, independent of storage and HTTP.

Each key carries its own revision; deleted keys stay as tombstones that
remember their last revision, so a recreated key never reuses a number.
The usage (key and byte totals) is kept beside the keys.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from cairn.addresses.models import AddressRecord


class StateEntry(msgspec.Struct, frozen=True):
    """A key as stored; `value_json` is its canonical JSON text, None for a tombstone."""

    key: str
    revision: int
    size: int
    updated_at: float
    value_json: str | None

    @property
    def exists(self) -> bool:
        return self.value_json is not None

    @property
    def value(self) -> Any:
        """The value parsed for display; storage and accounting keep the text."""
        return json.loads(self.value_json) if self.value_json is not None else None


class StateUsage(msgspec.Struct, frozen=True):
    keys: int = 0
    bytes: int = 0


class StateSnapshot(msgspec.Struct, frozen=True):
    """What one consistent read saw: the head, the entries asked for, the usage."""

    head: AddressRecord | None
    entries: dict[str, StateEntry]
    usage: StateUsage


class KeyChange(msgspec.Struct, frozen=True):
    """A planned write of one key: `value_json` None deletes it.

    `previous` is the entry the plan was made from; the write commits only
    if the key still is at that entry's revision (or still absent).
    """

    key: str
    previous: StateEntry | None
    revision: int
    size: int
    value_json: str | None


class StateLimits(msgspec.Struct, frozen=True):
    max_keys: int
    max_bytes: int


class StateChanges(msgspec.Struct, frozen=True):
    """Key changes that commit with the `state.updated` events they cause.

    The usage moves by `usage_delta(changes)` and must stay within `limits`
    even when other writers grow it concurrently; `expires_at` is the
    address's expiry, which the state items share.
    """

    changes: list[KeyChange]
    limits: StateLimits
    expires_at: float | None


def usage_delta(changes: list[KeyChange]) -> StateUsage:
    """How many keys and bytes the changes add (negative when they free some)."""
    keys_delta = bytes_delta = 0
    for change in changes:
        before = change.previous if change.previous is not None and change.previous.exists else None
        keys_delta += (change.value_json is not None) - (before is not None)
        bytes_delta += change.size - (before.size if before is not None else 0)
    return StateUsage(keys=keys_delta, bytes=bytes_delta)
