"""Files of an address (its read token): bytes written whole under a key, read, listed by prefix, deleted.

What Strands' `Storage` protocol asks of a backend: its snapshot session
manager keeps an agent's latest snapshot and its history there. A write
replaces a file in one commit, so a reader finds the old bytes or the new,
never a mix, whatever their size; the last write wins. Files go with their
address, which may store at most `max_bytes` of them (`stored_bytes`: each
file's key and bytes and a small overhead).
"""

from __future__ import annotations

import re

from cairn.addresses.ports import AddressStore
from cairn.checkpoints.models import Owner, owner_of
from cairn.clock import Clock
from cairn.errors import InvalidRequest, NotFound, PayloadTooLarge
from cairn.files.ports import FilePage, FileStore

# A key is a DynamoDB sort key's text (at most 1,024 bytes, its pieces' keys longer still).
MAX_KEY_BYTES = 512
# One write's bytes: base64 in a request within Lambda's 6 MB, and one transaction's 4 MB.
MAX_FILE_BYTES = 3 * 1024 * 1024
MAX_LIST = 1000
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Files:
    def __init__(self, addresses: AddressStore, store: FileStore, clock: Clock, *, max_bytes: int) -> None:
        self._addresses = addresses
        self._store = store
        self._clock = clock
        self._max_bytes = max_bytes

    def write(self, address_id: str, read_token: str | None, key: str, data: bytes) -> None:
        _check_key(key)
        if len(data) > MAX_FILE_BYTES:
            raise PayloadTooLarge(f"A file holds at most {MAX_FILE_BYTES} bytes.", max_bytes=MAX_FILE_BYTES)
        self._store.write(self._owner(address_id, read_token), key, data, now=self._clock(), max_bytes=self._max_bytes)

    def read(self, address_id: str, read_token: str | None, key: str) -> bytes:
        _check_key(key)
        self._owner(address_id, read_token)
        data = self._store.read(address_id, key)
        if data is None:
            raise NotFound("No file under this key.", key=key)
        return data

    def delete(self, address_id: str, read_token: str | None, key: str) -> bool:
        _check_key(key)
        return self._store.delete(self._owner(address_id, read_token), key, now=self._clock())

    def list(self, address_id: str, read_token: str | None, prefix: str, *, after: str | None, limit: int) -> FilePage:
        if len(prefix.encode()) > MAX_KEY_BYTES or _CONTROL.search(prefix):
            raise InvalidRequest(f"A prefix is a key's start: at most {MAX_KEY_BYTES} bytes.", field="prefix")
        if not 1 <= limit <= MAX_LIST:
            raise InvalidRequest(f"List 1 to {MAX_LIST} keys at once.", field="limit")
        if after is not None:
            _check_key(after, field="after")
            if not after.startswith(prefix):
                raise InvalidRequest("`after` is a key the listing gave: it starts with the prefix.", field="after")
        self._owner(address_id, read_token)
        return self._store.keys(address_id, prefix, after=after, limit=limit)

    def _owner(self, address_id: str, read_token: str | None) -> Owner:
        return owner_of(self._addresses, address_id, read_token, now=self._clock())


def _check_key(key: str, *, field: str = "key") -> None:
    if not key or len(key.encode()) > MAX_KEY_BYTES or _CONTROL.search(key):
        raise InvalidRequest(f"A key is 1 to {MAX_KEY_BYTES} bytes of text, no control characters.", field=field)
