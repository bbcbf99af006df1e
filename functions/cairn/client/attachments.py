"""Attachments of `email.received` events, read from the stored message on demand."""

from __future__ import annotations

from pathlib import Path

from cairn.client.http import HttpClient
from cairn.client.models import Download, Event
from cairn.client.paths import segment
from cairn.disk import write_durably


class Attachments:
    def __init__(self, http: HttpClient, events_url: str, read_token: str) -> None:
        self._http = http
        self._url = events_url
        self._token = read_token

    def download(self, event: Event | str, attachment_id: str, path: str | Path) -> Download:
        """Save one attachment (`data.attachments[].id`) to `path`, readable by its owner only.

        Counts as a poll against the address's rate. `PayloadTooLarge` over
        the size limit; `AttachmentUnavailable` once the stored message expired.
        """
        event_id = event if isinstance(event, str) else event["id"]
        url = f"{self._url}/{segment(event_id, 'event id')}/attachments/{segment(attachment_id, 'attachment id')}"
        response = self._http.request("GET", url, token=self._token)
        write_durably(path, response.content)
        content_type = response.headers.get("content-type", "application/octet-stream")
        return {"path": str(path), "size": len(response.content), "content_type": content_type}
