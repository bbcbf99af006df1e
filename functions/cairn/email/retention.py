"""Raw mail is kept while an address holds it, and no longer.

A received message is stored before any address is known to exist (SES
writes it to S3 first; `cairn serve` keeps a file). Ingest discards it when
no recipient is a live address, and deleting an address discards the
messages its feed holds, unless another live Cairn address the message
names (To, Cc, or a Received `for` clause) may still need it for replay or
attachments. A co-recipient the message does not name (a blind copy) cannot
be seen here: its event stays, its stored copy goes with the deleted one.
"""

from __future__ import annotations

import json

from aws_lambda_powertools import Logger

from cairn.addresses.access import is_live
from cairn.addresses.ports import AddressStore
from cairn.clock import Clock
from cairn.email import mime
from cairn.email.ingest import EVENT_TYPE, address_id_of
from cairn.email.ports import MESSAGE_ID_PATTERN, RawMessageStore
from cairn.settings import Settings

logger = Logger(service="cairn")

_PAGE = 1_000


class MailRetention:
    def __init__(self, table: AddressStore, raw_messages: RawMessageStore, settings: Settings, clock: Clock) -> None:
        self._table = table
        self._raw_messages = raw_messages
        self._settings = settings
        self._clock = clock

    def forget_address(self, address_id: str) -> None:
        """Discard the stored messages of an address about to be deleted (its owner has been admitted)."""
        for message_id in self._message_ids(address_id):
            raw = self._raw_messages.load(message_id)
            if raw is None:
                continue
            domain = self._settings.email_domain
            # The headers alone: each stored message is read during the DELETE, and its body need not be.
            named = (address_id_of(recipient, domain) for recipient in mime.recipients_named(mime.parse_headers(raw)))
            if any(other and other != address_id and is_live(self._table, other, now=self._clock()) for other in named):
                continue
            self._raw_messages.delete(message_id)
            logger.info("stored email deleted", extra={"message_id": message_id, "reason": "address_deleted"})

    def _message_ids(self, address_id: str) -> list[str]:
        """The stored-message ids of the address's mail events, oldest first."""
        found: list[str] = []
        after = 0
        while True:
            page = self._table.list_events(
                address_id, after=after, limit=_PAGE, now=self._clock(), max_bytes=self._settings.max_page_bytes
            )
            for event in page.events:
                if event.type == EVENT_TYPE and event.ingress_surface == self._settings.email_ingress_surface:
                    message_id = json.loads(event.data_json).get("message_id")
                    if isinstance(message_id, str) and MESSAGE_ID_PATTERN.fullmatch(message_id):
                        found.append(message_id)
            if not page.has_more or not page.events:
                return found
            after = page.events[-1].sequence
