"""The owner's changes to an address's inbox settings (kept headers, verifiers), with the read token."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from msgspec.structs import replace

from cairn import credentials
from cairn.addresses.access import authenticate
from cairn.addresses.inbox_settings import InboxSettings, keep_headers, sealed_verifiers, verifier
from cairn.addresses.ports import AddressStore
from cairn.clock import Clock
from cairn.errors import Unavailable
from cairn.server_secret import ServerSecret

_SAVE_ATTEMPTS = 5


class InboxConfiguration:
    """The owner's changes to the inbox settings, each a compare-and-set on the address head."""

    def __init__(self, table: AddressStore, clock: Clock, server_secret: ServerSecret) -> None:
        self._table = table
        self._clock = clock
        self._server_secret = server_secret

    def read(self, address_id: str, read_token: str | None) -> InboxSettings:
        return authenticate(self._table, address_id, read_token, now=self._clock()).inbox

    def set_keep_headers(self, address_id: str, read_token: str | None, names: Iterable[str]) -> InboxSettings:
        headers = keep_headers(names)
        return self._change(address_id, read_token, lambda settings: replace(settings, keep_headers=headers))

    def put_verifier(
        self, address_id: str, read_token: str | None, kind: str, secret: str, tolerance_s: int | None
    ) -> tuple[InboxSettings, bool]:
        """Register (or replace) the verifier of `kind`; whether it is new."""
        added = verifier(kind, secret, tolerance_s, now=self._clock())
        existed: list[bool] = []

        def change(settings: InboxSettings) -> InboxSettings:
            others = tuple(item for item in settings.verifiers if item.kind != kind)
            existed[:] = [len(others) != len(settings.verifiers)]
            return replace(settings, verifiers=(*others, added))

        return self._change(address_id, read_token, change), not existed[0]

    def delete_verifier(self, address_id: str, read_token: str | None, kind: str) -> InboxSettings:
        """Remove the verifier of `kind`; removing one that is not there changes nothing."""
        return self._change(
            address_id,
            read_token,
            lambda settings: replace(settings, verifiers=tuple(one for one in settings.verifiers if one.kind != kind)),
        )

    def _change(
        self, address_id: str, read_token: str | None, change: Callable[[InboxSettings], InboxSettings]
    ) -> InboxSettings:
        """Read, change, write under the revision read; a concurrent change makes it read again.

        Verifier secrets are written sealed, those stored as given before sealing existed included.
        """
        for _ in range(_SAVE_ATTEMPTS):
            record = authenticate(self._table, address_id, read_token, now=self._clock())
            wanted = change(record.inbox)
            if wanted == record.inbox:
                # Nothing to write: a new revision would send inbox posts in flight to read the settings again.
                return record.inbox
            changed = replace(wanted, revision=record.inbox.revision + 1)
            changed = sealed_verifiers(changed, address_id, self._server_secret)
            digest = credentials.digest(read_token or "")
            if self._table.save_inbox_settings(address_id, digest, changed, now=self._clock()):
                return changed
        raise Unavailable("The inbox settings are changing concurrently; retry shortly.")
