"""Deliver mail the way SES does: raw message into S3, then the receipt event
to the email function."""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.entrypoints import email_handler
from tests.support.lambda_client import LambdaClient, Reply, path_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "email"
BUCKET = "cairn-inbound-mail"
PREFIX = "inbound/"


def fixture_message(name: str, *addresses: str) -> bytes:
    """A recorded message addressed to `addresses`, with CRLF line ends as on the wire."""
    text = (FIXTURES / name).read_text()
    for placeholder, address in zip(("{{ADDRESS}}", "{{ADDRESS_2}}"), addresses, strict=False):
        text = text.replace(placeholder, address)
    return text.replace("\n", "\r\n").encode()


def ses_event(message_id: str, recipients: list[str]) -> dict[str, Any]:
    """The recorded SES receipt event, for another message and its recipients."""
    event = json.loads((FIXTURES / "ses_event.json").read_text())
    record = event["Records"][0]["ses"]
    record["mail"]["messageId"] = message_id
    record["mail"]["destination"] = list(recipients)
    record["receipt"]["recipients"] = list(recipients)
    return event


def new_message_id() -> str:
    """Shaped like an SES message id: 40 lower-case letters and digits."""
    return secrets.token_hex(20)


class LambdaContext:
    function_name = "cairn-email"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:cairn-email"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"


@dataclass
class Mailroom:
    """The API on moto plus an SES stand-in that writes to moto S3."""

    api: LambdaClient
    s3: Any

    def store(self, raw: bytes, message_id: str | None = None) -> str:
        """What SES's S3 action does; returns the message id."""
        message_id = message_id or new_message_id()
        self.s3.put_object(Bucket=BUCKET, Key=PREFIX + message_id, Body=raw)
        return message_id

    def receive(self, raw: bytes, recipients: list[str], *, message_id: str | None = None) -> str:
        """Store the message, then invoke the email function as SES would."""
        message_id = self.store(raw, message_id)
        self.invoke(ses_event(message_id, recipients))
        return message_id

    def invoke(self, event: dict[str, Any]) -> None:
        email_handler.lambda_handler(copy.deepcopy(event), LambdaContext())

    def emails(self, created: dict[str, Any]) -> list[dict[str, Any]]:
        reply = self.api.poll(created)
        assert reply.status == 200, reply.text
        return [event for event in reply.json()["events"] if event["type"] == "email.received"]

    def download(self, created: dict[str, Any], event_id: str, attachment_id: str) -> Reply:
        url = f"{path_of(created['endpoints']['events_url'])}/{event_id}/attachments/{attachment_id}"
        return self.api.request("GET", url, token=created["credentials"]["read_token"])

    def replay(self, created: dict[str, Any], body: dict[str, Any]) -> Reply:
        url = f"{path_of(created['endpoints']['address_url'])}/email/replay"
        return self.api.request("POST", url, json_body=body, token=created["credentials"]["read_token"])


def verified_address(api: LambdaClient, person: str, sent: Sequence[Any]) -> dict[str, Any]:
    """A new address whose contact `person` is verified with the code in the last message of `sent`.

    `sent`: what a test carrier was handed (each with its `raw` bytes), filled as the code goes out.
    """
    created = api.provision()
    root = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]
    api.request("POST", f"{root}/email/contacts", json_body={"email": person}, token=token)
    code = sent[-1].raw.split(b"code is: ")[1][:6].decode()
    verified = api.request("POST", f"{root}/email/contacts", json_body={"email": person, "code": code}, token=token)
    assert verified.status == 200
    return created
