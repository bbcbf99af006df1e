"""Mail an address sends: its contacts, their codes, and plain-text messages to them."""

from __future__ import annotations

from typing import Any

from cairn.client.http import HttpClient, json_body
from cairn.client.models import ContactChange, ContactListing, SendReceipt
from cairn.client.paths import segment


class Mailbox(str):
    """The address's email, as the string it always was, with the operations that send from it.

    `addr.email` is this: `str(addr.email)` is the address, and
    `addr.email.send(...)` mails from it. Empty for an address known only by
    id and token (`Address.connect`), whose mail operations work all the same.
    """

    _http: HttpClient
    _root: str
    _token: str

    def __new__(cls, value: str, *, http: HttpClient, address_url: str, read_token: str) -> Mailbox:
        mailbox = super().__new__(cls, value)
        mailbox._http = http
        mailbox._root = f"{address_url}/email"
        mailbox._token = read_token
        return mailbox

    def contacts(self) -> ContactListing:
        """Every contact with its status, and whether the server can send mail at all."""
        listing: ContactListing = self._http.request("GET", f"{self._root}/contacts", token=self._token).json()
        return listing

    def add_contact(self, email: str) -> ContactChange:
        """Mail a six-digit code to `email` from this address; the person tells you the code."""
        body = json_body({"email": email})
        response = self._http.request("POST", f"{self._root}/contacts", token=self._token, body=body)
        change: ContactChange = response.json()
        return change

    def verify_contact(self, email: str, code: str) -> ContactChange:
        """Confirm `email` with the code it received; `WrongCode`, `CodeExpired`, `TooManyAttempts` otherwise."""
        body = json_body({"email": email, "code": code})
        response = self._http.request("POST", f"{self._root}/contacts", token=self._token, body=body)
        change: ContactChange = response.json()
        return change

    def remove_contact(self, email: str) -> None:
        self._http.request("DELETE", f"{self._root}/contacts/{segment(email, 'email')}", token=self._token)

    def send(
        self,
        to: str,
        text: str,
        *,
        idempotency_key: str,
        subject: str | None = None,
        reply_to_event_id: str | None = None,
    ) -> SendReceipt:
        """Send plain text to one verified contact.

        Repeat with the same `idempotency_key` after a timeout or an error: the
        original send comes back (`duplicate`) and nothing is mailed twice.
        `subject` may be left out when replying (`Re: ...` of the mail answered).
        """
        request: dict[str, Any] = {"to": to, "text": text}
        if subject is not None:
            request["subject"] = subject
        if reply_to_event_id is not None:
            request["reply_to_event_id"] = reply_to_event_id
        headers = {"Idempotency-Key": idempotency_key}
        receipt: SendReceipt = self._http.request(
            "POST", f"{self._root}/send", token=self._token, body=json_body(request), headers=headers
        ).json()
        return receipt
