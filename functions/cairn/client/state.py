"""An address's durable JSON state: read, compare-and-set, delete, batches, updates."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

from cairn.client.http import HttpClient, jittered, json_body
from cairn.client.models import StateBatch, StateDeletion, StateListing, StateOperation, StateValue
from cairn.client.paths import segment
from cairn.errors import NotFound, RevisionConflict

UPDATE_ATTEMPTS = 25
# Losing a compare-and-set means another writer just wrote: a short pause is enough.
UPDATE_BASE_DELAY = 0.02
UPDATE_MAX_DELAY = 1.0


class State:
    def __init__(self, http: HttpClient, state_url: str, read_token: str) -> None:
        self._http = http
        self._url = state_url
        self._token = read_token

    def get(self, key: str) -> StateValue:
        """The key's `value` and `revision`; `NotFound` if it does not exist."""
        current: StateValue = self._http.request("GET", self._key_url(key), token=self._token).json()
        return current

    def set(self, key: str, value: Any, *, if_revision: int | None = None) -> StateValue:
        """Write `value` under `key`.

        `if_revision` None writes unconditionally, 0 only creates, N writes
        only if the key is still at revision N; otherwise `RevisionConflict`
        (with `current_revision`) and nothing changed.
        """
        request: dict[str, Any] = {"value": value}
        if if_revision is not None:
            request["if_revision"] = if_revision
        written: StateValue = self._http.request(
            "PUT", self._key_url(key), token=self._token, body=json_body(request)
        ).json()
        return written

    def delete(self, key: str, *, if_revision: int | None = None) -> StateDeletion:
        """Delete `key` (only at revision `if_revision`, when given); `NotFound` if it is absent."""
        headers = {"If-Match": str(if_revision)} if if_revision is not None else None
        deletion: StateDeletion = self._http.request(
            "DELETE", self._key_url(key), token=self._token, headers=headers
        ).json()
        return deletion

    def keys(self) -> StateListing:
        """Every key with its revision and size, and the address's usage against its limits."""
        listing: StateListing = self._http.request("GET", self._url, token=self._token).json()
        return listing

    def transaction(self, operations: Sequence[StateOperation]) -> StateBatch:
        """Apply every operation or none; one `RevisionConflict` lists every key that moved."""
        request = {"operations": list(operations)}
        batch: StateBatch = self._http.request("POST", self._url, token=self._token, body=json_body(request)).json()
        return batch

    def update(
        self,
        key: str,
        change: Callable[[Any], Any],
        *,
        default: Any = None,
        attempts: int = UPDATE_ATTEMPTS,
    ) -> StateValue:
        """Read `key`, write `change(value)` if nobody wrote in between, else read again and retry.

        `change` gets the current value (a copy of `default` when the key does
        not exist) and returns the new one; it runs once per attempt, so it must
        not have side effects of its own. Losing writers back off with jitter;
        after `attempts` lost rounds the last `RevisionConflict` is raised.
        """
        attempt = 0
        while True:
            try:
                current = self.get(key)
                value, revision = current["value"], current["revision"]
            except NotFound:
                value, revision = copy.deepcopy(default), 0
            try:
                return self.set(key, change(value), if_revision=revision)
            except RevisionConflict:
                attempt += 1
                if attempt >= attempts:
                    raise
                time.sleep(jittered(attempt, base=UPDATE_BASE_DELAY, cap=UPDATE_MAX_DELAY))

    def _key_url(self, key: str) -> str:
        return f"{self._url}/{segment(key, 'key')}"
