"""`cairn serve`'s stand-in for the mail bucket's lifecycle rule.

In AWS, S3 expires stored messages after the event retention. Locally the
messages are files, so this loop deletes those older than the retention: at
start, then once an hour. Mail of deleted addresses goes at once with its
address (`MailRetention`); this covers addresses that simply expired.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

from cairn.dynamodb.raw_messages import FileRawMessages

HOUR_SECONDS = 3600.0


class StoredMailExpiry:
    """Deletes stored messages older than `retention_seconds` while the server runs."""

    def __init__(
        self,
        store: FileRawMessages,
        retention_seconds: int,
        *,
        interval_seconds: float = HOUR_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._retention = retention_seconds
        self._interval = interval_seconds
        self._clock = clock
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stored-mail-expiry", daemon=True)

    def expire_now(self) -> int:
        """Delete what has outlived the retention; how many messages went."""
        return self._store.forget_older_than(self._clock() - self._retention)

    def __enter__(self) -> StoredMailExpiry:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            try:
                self.expire_now()
            except OSError:
                pass  # an unreadable folder now; tried again next time
            if self._stopping.wait(self._interval):
                return
