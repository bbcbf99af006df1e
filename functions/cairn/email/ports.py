"""What the email use cases need from storage: the raw messages as received.

`cairn.dynamodb.raw_messages` implements it on S3 (AWS) and on files
(`cairn serve`); addresses and their feeds come through
`cairn.addresses.ports`.
"""

from __future__ import annotations

import re
from typing import Protocol

# SES message ids are letters, digits and hyphens; ids outside this alphabet
# could escape a folder or an S3 prefix, so no store accepts them.
MESSAGE_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,200}")


class RawMessageStore(Protocol):
    def load(self, message_id: str) -> bytes | None:
        """The message as received, or None once it is gone (expired or never stored)."""

    def save(self, message_id: str, raw: bytes) -> None:
        """Keep a received message under `message_id`."""

    def delete(self, message_id: str) -> None:
        """Forget a message; nothing happens when it is already gone."""
