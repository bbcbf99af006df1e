"""An address as an agent holds it: provisioned once, saved, restored by any later process."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cairn.client.attachments import Attachments
from cairn.client.events import Events
from cairn.client.files import Files
from cairn.client.http import HttpClient, json_body
from cairn.client.inbox import Inbox
from cairn.client.mailbox import Mailbox
from cairn.client.paths import segment
from cairn.client.private import read_private
from cairn.client.state import State
from cairn.client.subscriptions import Subscriptions
from cairn.disk import write_durably

ADDRESSES_PATH = "/api/v1/addresses"


class Address:
    """One address: its credentials, its URLs and clients for its state, feed, inbox and attachments.

    Built from the server's provisioning answer, which is also what `to_json`
    writes. Every URL comes from that answer, never from a path template, so
    the saved address keeps working wherever the server put its endpoints.
    """

    def __init__(self, document: Mapping[str, Any], *, http: HttpClient | None = None) -> None:
        """`document`: `{"address": {"id", …}, "credentials": {"read_token"}, "endpoints": {…}}`."""
        try:
            self.id: str = document["address"]["id"]
            self.read_token: str = document["credentials"]["read_token"]
            endpoints = document["endpoints"]
            self.events_url: str = endpoints["events_url"]
            self.state_url: str = endpoints["state_url"]
            self.address_url: str = endpoints["address_url"]
        except KeyError as error:
            raise ValueError(f"Not a Cairn address: missing {error}.") from error
        except TypeError as error:
            raise ValueError("Not a Cairn address: not an object with address, credentials and endpoints.") from error
        used = (self.id, self.read_token, self.events_url, self.state_url, self.address_url)
        if not all(isinstance(text, str) for text in used):
            raise ValueError("Not a Cairn address: its id, read token and endpoints are not all text.")
        self._document = copy.deepcopy(dict(document))
        self._owns_http = http is None
        self._http = http or HttpClient()
        self.state = State(self._http, self.state_url, self.read_token)
        self.events = Events(self._http, self.events_url, self.read_token)
        self.attachments = Attachments(self._http, self.events_url, self.read_token)
        self.subscriptions = Subscriptions(self._http, self.address_url, self.read_token)
        self.files = Files(self._http, self.address_url, self.read_token)

    # -- making one ------------------------------------------------------------

    @classmethod
    def provision(
        cls,
        base_url: str,
        *,
        task_id: str | None = None,
        name: str | None = None,
        expires_in: int | None = None,
        keep_headers: list[str] | None = None,
        http: HttpClient | None = None,
    ) -> Address:
        """Create a new address (no account needed). Save it: its read token is shown only now.

        `keep_headers`: request headers its inbox keeps on each event (see `keep_headers`).
        """
        inbox = None if keep_headers is None else {"keep_headers": keep_headers}
        request = {"task_id": task_id, "name": name, "expires_in_seconds": expires_in, "inbox": inbox}
        body = json_body({field: value for field, value in request.items() if value is not None})
        client = http or HttpClient()
        response = client.request("POST", base_url.rstrip("/") + ADDRESSES_PATH, body=body)
        address = cls(response.json(), http=client)
        address._owns_http = http is None  # a client made here is the address's to close
        return address

    @classmethod
    def connect(cls, base_url: str, address_id: str, read_token: str, *, http: HttpClient | None = None) -> Address:
        """An address known only by id and read token (as MCP tools hold it); it has no inbox URL."""
        root = f"{base_url.rstrip('/')}{ADDRESSES_PATH}/{segment(address_id, 'address id')}"
        document = {
            "address": {"id": address_id},
            "credentials": {"read_token": read_token},
            "endpoints": {"events_url": f"{root}/events", "state_url": f"{root}/state", "address_url": root},
        }
        return cls(document, http=http)

    # -- keeping it ------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The provisioning answer, read token included: keep it private."""
        return copy.deepcopy(self._document)

    def to_json(self) -> str:
        return json.dumps(self._document, indent=2, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes, *, http: HttpClient | None = None) -> Address:
        return cls(json.loads(text), http=http)

    def save(self, path: str | Path) -> None:
        """Write the address to `path`, readable and writable by its owner only (0600)."""
        write_durably(path, self.to_json().encode())

    @classmethod
    def restore(cls, path: str | Path, *, http: HttpClient | None = None) -> Address:
        """The address saved at `path`; refuses symbolic links and files others can read."""
        return cls.from_json(read_private(path), http=http)

    # -- about it --------------------------------------------------------------

    @property
    def email(self) -> Mailbox:
        """The address's email (a `str`), whose methods manage contacts and send mail from it."""
        return Mailbox(
            self._document["address"].get("email") or "",
            http=self._http,
            address_url=self.address_url,
            read_token=self.read_token,
        )

    @property
    def http(self) -> HttpClient:
        """The HTTP client this address talks through, for helpers that call its other routes (`CairnSaver`)."""
        return self._http

    @property
    def inbox_url(self) -> str | None:
        """The write-only capability URL; hand it to whoever should call back. None after `connect`."""
        inbox_url: str | None = self._document["endpoints"].get("inbox_url")
        return inbox_url

    @property
    def expires_at(self) -> str | None:
        expires_at: str | None = self._document["address"].get("expires_at")
        return expires_at

    @property
    def inbox(self) -> Inbox:
        """Post to this address's own inbox (as a worker holding `inbox_url` would)."""
        if self.inbox_url is None:
            raise ValueError("This address has no inbox URL: it is only shown when the address is provisioned.")
        return Inbox(self.inbox_url, http=self._http)

    def describe(self) -> dict[str, Any]:
        """Metadata, feed depth and state usage."""
        described: dict[str, Any] = self._http.request("GET", self.address_url, token=self.read_token).json()
        return described

    def inbox_settings(self) -> dict[str, Any]:
        """`{"inbox": {"keep_headers": [...], "verifiers": [{"kind", "tolerance_s", "created_at"}]}}`."""
        settings: dict[str, Any] = self._http.request("GET", f"{self.address_url}/inbox", token=self.read_token).json()
        return settings

    def keep_headers(self, names: list[str]) -> dict[str, Any]:
        """Keep these request headers (up to 16; never Authorization or Cookie) on each inbox event from now on."""
        body = json_body({"inbox": {"keep_headers": names}})
        changed: dict[str, Any] = self._http.request("PATCH", self.address_url, token=self.read_token, body=body).json()
        return changed

    def set_verifier(self, kind: str, secret: str, *, tolerance_s: int | None = None) -> dict[str, Any]:
        """Require inbox posts to carry a valid `github`, `stripe`, `slack` or `standard_webhooks` signature.

        With verifiers set, a post that passes none is refused
        (`SignatureInvalid`) and one that passes has `verified_by` on its
        event. The secret is never shown again.
        """
        request = {"secret": secret, "tolerance_s": tolerance_s}
        body = json_body({field: value for field, value in request.items() if value is not None})
        url = f"{self.address_url}/inbox/verifiers/{segment(kind, 'verifier kind')}"
        verifier: dict[str, Any] = self._http.request("PUT", url, token=self.read_token, body=body).json()
        return verifier

    def remove_verifier(self, kind: str) -> dict[str, Any]:
        url = f"{self.address_url}/inbox/verifiers/{segment(kind, 'verifier kind')}"
        removed: dict[str, Any] = self._http.request("DELETE", url, token=self.read_token).json()
        return removed

    def delete(self) -> None:
        """Delete the address with its state and feed; its token and inbox URL stop working at once."""
        self._http.request("DELETE", self.address_url, token=self.read_token)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Address:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        # Never the read token: reprs end up in logs and tracebacks.
        return f"Address(id={self.id!r}, email={str(self.email)!r})"
