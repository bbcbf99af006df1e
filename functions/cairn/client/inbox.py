"""Deliver to an address through its inbox URL, as a worker or webhook would."""

from __future__ import annotations

import uuid
from typing import Any

from cairn.client.http import HttpClient, json_body
from cairn.client.models import Delivery


class Inbox:
    """Posts to one inbox URL. The URL is the credential (write-only): no token is sent."""

    def __init__(self, inbox_url: str, *, http: HttpClient | None = None) -> None:
        self.url = inbox_url
        self._owns_http = http is None
        self._http = http or HttpClient()

    def post(self, payload: Any, *, idempotency_key: str | None = None) -> Delivery:
        """Deliver one JSON payload; the event's `type`, `source` and `data` come from its fields.

        A repeated `idempotency_key` with the same payload returns the original
        event (`duplicate` true) instead of a second one. Without a key the
        SDK makes one up for this call, so its own retries after a 5xx or a
        refused connection can never deliver twice.
        """
        key = idempotency_key or f"cairn-python:{uuid.uuid4()}"
        response = self._http.request("POST", self.url, body=json_body(payload), headers={"Idempotency-Key": key})
        delivery: Delivery = response.json()
        return delivery

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Inbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
