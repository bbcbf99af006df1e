"""The durable JSON state of an address: revision-checked keys whose every
change is recorded as a `state.updated` event in the same transaction.

Accounting, defined once: a key costs the UTF-8 bytes of its name, plus the
UTF-8 bytes of its value as canonical JSON (sorted keys, no whitespace), plus
`PER_KEY_OVERHEAD` bytes for its revision and timestamp. An address holds at
most `state_max_keys` keys and `state_max_bytes` bytes by that measure.
"""

from __future__ import annotations

import random
import re
import time
from typing import Any, Literal

import msgspec

from cairn import credentials, jsontext
from cairn.addresses.access import admit, authenticate, require_well_formed
from cairn.addresses.models import STATE_SURFACE, NewEvent
from cairn.addresses.ports import (
    AddressStore,
    AppendRequest,
    Credential,
    CredentialKind,
    StateMoved,
    StateStore,
    Waiter,
)
from cairn.addresses.quota import Writer
from cairn.addresses.state_model import (
    KeyChange,
    StateChanges,
    StateEntry,
    StateLimits,
    StateSnapshot,
    StateUsage,
    usage_delta,
)
from cairn.clock import Clock
from cairn.errors import InvalidRequest, NotFound, RevisionConflict, StateLimitExceeded, Unavailable
from cairn.settings import Settings

# `.` and `..` are left out: clients resolve them as path segments, so no URL names them.
KEY_PATTERN = re.compile(r"(?!\.\.?$)[A-Za-z0-9._:-]{1,128}")
# What a batch may delete: keys of either name that older versions let a batch set included.
_STORED_KEY_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")
PER_KEY_OVERHEAD = 32
EVENT_TYPE = "state.updated"
EVENT_SOURCE = "state"
_RETRY_BUDGET_SECONDS = 10.0


def entry_size(key: str, value_json: str) -> int:
    """Bytes a key with this canonical JSON value counts against the limit."""
    return len(key.encode()) + len(value_json.encode()) + PER_KEY_OVERHEAD


class StateOperation(msgspec.Struct, frozen=True):
    """One change asked for; `if_revision` (0 or more) is checked at the edge that built it."""

    key: str
    op: Literal["set", "delete"]
    value: Any = None
    if_revision: int | None = None


class StateWrite(msgspec.Struct, frozen=True):
    """The outcome of one operation; `value` is the value written, as the caller gave it."""

    key: str
    op: Literal["set", "delete"]
    revision: int
    value: Any
    created: bool
    updated_at: float


class AddressState:
    def __init__(
        self, addresses: AddressStore, state: StateStore, waiter: Waiter, settings: Settings, clock: Clock
    ) -> None:
        self._addresses = addresses
        self._state = state
        self._waiter = waiter
        self._settings = settings
        self._clock = clock
        self.limits = StateLimits(max_keys=settings.state_max_keys, max_bytes=settings.state_max_bytes)

    # -- reads ---------------------------------------------------------------

    def list_keys(self, address_id: str, read_token: str | None) -> tuple[list[StateEntry], StateUsage]:
        authenticate(self._addresses, address_id, read_token, now=self._clock())
        entries, usage = self._state.read_all(address_id)
        return sorted((entry for entry in entries.values() if entry.exists), key=lambda e: e.key), usage

    def get(self, address_id: str, read_token: str | None, key: str) -> StateEntry:
        validate_key(key)
        require_well_formed(address_id)
        snapshot = self._state.read(address_id, [key])
        admit(snapshot.head, read_token, now=self._clock())
        entry = snapshot.entries.get(key)
        if entry is None or not entry.exists:
            raise NotFound(f"No state key {key!r}.", key=key)
        return entry

    # -- writes --------------------------------------------------------------

    def apply(self, address_id: str, read_token: str | None, operations: list[StateOperation]) -> list[StateWrite]:
        """Apply every operation or none; retried internally when only other keys moved."""
        return self.apply_with_usage(address_id, read_token, operations)[0]

    def apply_with_usage(
        self, address_id: str, read_token: str | None, operations: list[StateOperation]
    ) -> tuple[list[StateWrite], StateUsage]:
        """`apply`, with the totals as the writes left them, known without another read.

        They are the totals the writes were planned from (one consistent
        read) with the writes' own change added; a write to other keys that
        commits at the same moment is not in them, as it would not be in a
        read made a moment earlier. Listing the state reads the totals as stored.
        """
        prepared = self._prepare(operations)
        require_well_formed(address_id)
        deadline = time.monotonic() + _RETRY_BUDGET_SECONDS
        attempt = 0
        while True:
            now = self._clock()
            snapshot = self._state.read(address_id, [key for key, _, _ in prepared])
            head = admit(snapshot.head, read_token, now=now)
            changes = self._plan(prepared, snapshot)
            events = [
                NewEvent(
                    type=EVENT_TYPE,
                    source=EVENT_SOURCE,
                    data_json=jsontext.canonical(
                        {
                            "key": change.key,
                            "op": "set" if change.value_json is not None else "delete",
                            "revision": change.revision,
                            "size": change.size,
                        }
                    ),
                    ingress_surface=STATE_SURFACE,
                )
                for change in changes
            ]
            try:
                self._addresses.append(
                    AppendRequest(
                        address_id=address_id,
                        events=events,
                        credential=Credential(CredentialKind.READ_TOKEN, credentials.digest(read_token or "")),
                        now=now,
                        state=StateChanges(changes=changes, limits=self.limits, expires_at=head.expires_at),
                        last_sequence=head.last_sequence,
                        writer=Writer.OWNER,
                    )
                )
            except StateMoved as error:
                # A key or the totals moved since the read: read again and re-decide.
                attempt += 1
                if time.monotonic() >= deadline:
                    raise Unavailable("State is too busy right now; retry shortly.") from error
                # A growing random pause, so that writers of one hot key take turns instead of
                # re-reading in step and starving each other.
                time.sleep(random.uniform(0, 0.002 * min(2**attempt, 64)))
                continue
            self._waiter.notify(address_id)
            delta = usage_delta(changes)
            usage = StateUsage(keys=snapshot.usage.keys + delta.keys, bytes=snapshot.usage.bytes + delta.bytes)
            writes = [
                StateWrite(
                    key=change.key,
                    op=operation.op,
                    revision=change.revision,
                    value=operation.value if operation.op == "set" else None,
                    created=change.previous is None or not change.previous.exists,
                    updated_at=round(now, 3),
                )
                for change, (_, operation, _) in zip(changes, prepared, strict=True)
            ]
            return writes, usage

    def _prepare(self, operations: list[StateOperation]) -> list[tuple[str, StateOperation, str | None]]:
        if not operations:
            raise InvalidRequest("At least one operation is needed.", field="operations")
        if len(operations) > self.limits.max_keys:
            raise InvalidRequest(f"At most {self.limits.max_keys} operations at once.", field="operations")
        seen: set[str] = set()
        prepared = []
        for operation in operations:
            if operation.op != "delete" or not _STORED_KEY_PATTERN.fullmatch(operation.key):
                validate_key(operation.key)
            if operation.key in seen:
                raise InvalidRequest(f"Key {operation.key!r} appears twice.", field="operations", key=operation.key)
            seen.add(operation.key)
            value_json = jsontext.canonical(operation.value) if operation.op == "set" else None
            prepared.append((operation.key, operation, value_json))
        return prepared

    def _plan(self, prepared: list[tuple[str, StateOperation, str | None]], snapshot: StateSnapshot) -> list[KeyChange]:
        conflicts = []
        missing = []
        changes = []
        for key, operation, value_json in prepared:
            previous = snapshot.entries.get(key)
            current = previous.revision if previous is not None and previous.exists else None
            expected = operation.if_revision
            if expected is not None and (current != expected if expected else current is not None):
                conflicts.append({"key": key, "current_revision": current})
                continue
            if operation.op == "delete" and current is None:
                missing.append(key)
                continue
            changes.append(
                KeyChange(
                    key=key,
                    previous=previous,
                    revision=(previous.revision if previous is not None else 0) + 1,
                    size=entry_size(key, value_json) if value_json is not None else 0,
                    value_json=value_json,
                )
            )
        if conflicts:
            details: dict[str, Any] = {"conflicts": conflicts}
            if len(prepared) == 1:
                details.update(conflicts[0])
            names = ", ".join(repr(conflict["key"]) for conflict in conflicts)
            raise RevisionConflict(f"Another writer changed {names}; read it again and retry.", **details)
        if missing:
            raise NotFound(f"No state key {', '.join(map(repr, missing))}.", keys=missing, key=missing[0])
        self._check_limits(changes, snapshot.usage)
        return changes

    def _check_limits(self, changes: list[KeyChange], usage: StateUsage) -> None:
        delta = usage_delta(changes)
        keys_after = usage.keys + delta.keys
        bytes_after = usage.bytes + delta.bytes
        limits = self.limits
        if keys_after > limits.max_keys:
            raise StateLimitExceeded(
                f"An address holds at most {limits.max_keys} state keys.",
                limit="keys",
                max_keys=limits.max_keys,
                keys=keys_after,
            )
        if bytes_after > limits.max_bytes:
            raise StateLimitExceeded(
                f"State would take {bytes_after} bytes; the limit is {limits.max_bytes}.",
                limit="bytes",
                max_bytes=limits.max_bytes,
                bytes=bytes_after,
            )


def validate_key(key: str) -> None:
    if not KEY_PATTERN.fullmatch(key):
        raise InvalidRequest(
            "State keys are 1 to 128 characters of A-Z a-z 0-9 . _ : -, other than `.` and `..`", field="key"
        )
