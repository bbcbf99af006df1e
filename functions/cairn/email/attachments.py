"""Download an attachment of a received email, read from the stored message.

Nothing is copied at ingest: the event lists each attachment, and a
download parses the stored message again and sends that one part. When the
message has expired, so has the attachment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.addresses.feed import Feed
from cairn.addresses.models import IdempotencyClaim, sequence_of
from cairn.addresses.ports import AddressStore
from cairn.clock import Clock
from cairn.email import mime
from cairn.email.ingest import EVENT_TYPE, email_claims
from cairn.email.ports import RawMessageStore
from cairn.errors import AttachmentUnavailable, NotFound, PayloadTooLarge
from cairn.settings import Settings


class EmailAttachments:
    def __init__(
        self, table: AddressStore, raw_messages: RawMessageStore, feed: Feed, settings: Settings, clock: Clock
    ) -> None:
        self._table = table
        self._raw_messages = raw_messages
        self._feed = feed
        self._settings = settings
        self._clock = clock

    def download(
        self, address_id: str, read_token: str | None, event_id: str, attachment_id: str
    ) -> mime.AttachmentFile:
        """The attachment's bytes; each download counts as one poll of the address."""
        now = self._clock()
        self._feed.admit_read(address_id, read_token)
        return self._attachment(address_id, event_id, attachment_id, now)

    def download_held(
        self, address_id: str, read_token: str | None, event_id: str, attachment_id: str, *, client: str | None
    ) -> tuple[mime.AttachmentFile, Callable[[], None]]:
        """The same, for a download sent piece by piece, and what gives back the read it holds meanwhile.

        A slow reader holds the sending as a stream does, so the download holds one of `client`'s reads
        (`Feed.hold_client_read`) for up to a stream's time. The token is admitted first, as a stream's
        is: a stranger costs one refused write, not a held read taken and given back around it.
        """
        now = self._clock()
        self._feed.admit_read(address_id, read_token)
        release = self._feed.hold_client_read(client, seconds=self._settings.max_stream_seconds)
        try:
            return self._attachment(address_id, event_id, attachment_id, now), release
        except BaseException:
            release()
            raise

    def _attachment(self, address_id: str, event_id: str, attachment_id: str, now: float) -> mime.AttachmentFile:
        data = self._email_data(address_id, event_id, now)
        listed = _listed(data, attachment_id)
        limit = self._settings.email_attachment_max_bytes
        if listed["size"] > limit:
            raise PayloadTooLarge(
                f"The attachment has {listed['size']} bytes; downloads are limited to {limit}.",
                max_bytes=limit,
                size=listed["size"],
            )
        raw = self._raw_messages.load(data["message_id"])
        found = None if raw is None else mime.attachment(mime.parse(raw), attachment_id)
        if found is None:
            raise AttachmentUnavailable("The message this attachment came with is no longer stored.")
        return found

    def _email_data(self, address_id: str, event_id: str, now: float) -> dict[str, Any]:
        """The data of the retained event, if email ingest wrote it.

        Inbox callers choose their event's type and data freely, so neither
        proves anything: the message's idempotency claim, which only ingest
        can take, must point to this very event.
        """
        sequence = sequence_of(event_id)
        event = None if sequence is None else self._table.load_event(address_id, sequence, now=now)
        data = event.data if event is not None and event.id == event_id and event.type == EVENT_TYPE else None
        if not isinstance(data, dict):
            raise NotFound("No retained email event with this id.", event_id=event_id)
        message_id = data.get("message_id")
        header = data.get("internet_message_id")
        if not isinstance(message_id, str) or not self._claimed_by(
            address_id, email_claims(message_id, header if isinstance(header, str) else None), event_id, now
        ):
            raise NotFound("No retained email event with this id.", event_id=event_id)
        return data

    def _claimed_by(self, address_id: str, claims: list[IdempotencyClaim], event_id: str, now: float) -> bool:
        for claim in claims:
            claimed = self._table.claimed_event(address_id, claim.key_digest, now=now)
            if claimed is not None and claimed.ref.id == event_id:
                return True
        return False


def _listed(data: dict[str, Any], attachment_id: str) -> dict[str, Any]:
    listed: dict[str, Any]
    for listed in data.get("attachments") or []:
        if listed.get("id") == attachment_id:
            return listed
    raise NotFound("The email has no attachment with this id.", attachment_id=attachment_id)
