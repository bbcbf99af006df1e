"""Callbacks as the world sends them, over real HTTP on `cairn serve`.

Form fields, text and bytes as well as JSON; the headers an address keeps;
provider signatures (GitHub, Stripe, Slack, Standard Webhooks) computed here
from each provider's documented scheme and checked at the door; and the
same fields as the SDK, the CLI and the MCP tools show them.
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from cairn.client import Address, SignatureInvalid
from cairn.client.tasks import TaskStore
from tests.support import signatures
from tests.support.serve import ServeProcess, command_json

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server

FORM = "application/x-www-form-urlencoded"
SLACK_COMMAND = b"token=x&team_id=T1&command=%2Fdeploy&text=prod+now&user_name=ana&tag=a&tag=b"


def feed(address: Address) -> list[dict[str, Any]]:
    return address.events.poll(after=0)["events"]


def test_every_kind_of_body_becomes_an_event_and_retries_stay_single(served: ServeProcess):
    with Address.provision(served.base_url, task_id="bodies", expires_in=3600) as address:
        assert address.inbox_url is not None
        slack_url = f"{address.inbox_url}?type=slack.command&source=slack"
        png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
        sent = [
            (slack_url, SLACK_COMMAND, FORM),
            (address.inbox_url, "déploiement terminé\n".encode(), "text/plain; charset=utf-8"),
            (address.inbox_url, png, "image/png"),
            (address.inbox_url, b'{"type": "build.finished", "data": {"ok": true}}', FORM),  # curl -d's label
        ]
        with httpx.Client() as http:
            for index, (url, body, content_type) in enumerate(sent):
                for attempt in range(2):  # the retry of each kind finds the first event
                    headers = {"Content-Type": content_type, "Idempotency-Key": f"k-{index}"}
                    reply = http.post(url, content=body, headers=headers)
                    assert (reply.status_code, reply.json()["duplicate"]) == ((202, False), (200, True))[attempt]
            other = http.post(
                address.inbox_url, content=b"token=y", headers={"Content-Type": FORM, "Idempotency-Key": "k-0"}
            )
            assert other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_reused"
            broken = http.post(address.inbox_url, content=b"token=y", headers={"Content-Type": "application/json"})
            assert broken.status_code == 400 and broken.json()["error"]["code"] == "invalid_json"
        events = feed(address)
        assert [(event["type"], event["source"], event["content_type"]) for event in events] == [
            ("slack.command", "slack", FORM),
            ("message.received", "http", "text/plain"),
            ("message.received", "http", "image/png"),
            ("build.finished", "http", "application/json"),
        ]
        assert events[0]["data"] == {
            "token": "x",
            "team_id": "T1",
            "command": "/deploy",
            "text": "prod now",
            "user_name": "ana",
            "tag": ["a", "b"],
        }
        assert events[1]["data"] == "déploiement terminé\n"
        assert base64.b64decode(events[2]["data"]["base64"]) == png
        assert events[2]["data"]["content_type"] == "image/png"
        assert events[3]["data"] == {"ok": True}
        assert all(event["ingress_surface"] == "http" and event["verified_by"] is None for event in events)


KINDS = ["github", "stripe", "slack", "standard_webhooks"]
SECRETS = {
    "github": "gh-hook-secret",
    "stripe": "whsec_test_stripe",
    "slack": "8f742231b10e8888abcd99yyyzzz85a5",
    "standard_webhooks": signatures.STANDARD_WEBHOOKS_SECRET,
}
WRONG = {
    **{kind: "wrong-" + secret for kind, secret in SECRETS.items()},
    "standard_webhooks": "whsec_" + base64.b64encode(b"another key, another signature!!").decode(),
}


def signed(kind: str, secret: str, body: bytes, at: int) -> dict[str, str]:
    if kind == "github":
        return signatures.github(secret, body)
    return getattr(signatures, kind)(secret, body, at)


def test_each_provider_signature_is_checked_at_the_door(served: ServeProcess):
    body = b'{"id": "evt_1", "type": "invoice.paid"}'
    with httpx.Client() as http:
        for kind in KINDS:
            with Address.provision(served.base_url, task_id=f"verify-{kind}", expires_in=3600) as address:
                assert address.inbox_url is not None
                answer = address.set_verifier(kind, SECRETS[kind])
                assert answer["inbox"]["verifiers"][0]["kind"] == kind
                assert SECRETS[kind] not in json.dumps(answer) + json.dumps(address.inbox_settings())
                now = int(time.time())

                def post(
                    headers: dict[str, str], content: bytes = body, url: str = address.inbox_url
                ) -> httpx.Response:
                    return http.post(url, content=content, headers={"Content-Type": "application/json", **headers})

                refused = [
                    post(signed(kind, WRONG[kind], body, now)),  # wrong secret
                    post(signed(kind, SECRETS[kind], body, now), content=body + b"\n"),  # changed body
                    post({}),  # unsigned
                ]
                if kind != "github":  # GitHub signs no time
                    refused.append(post(signed(kind, SECRETS[kind], body, now - 600)))  # an old delivery replayed
                for reply in refused:
                    assert reply.status_code == 401, (kind, reply.text)
                    assert reply.json()["error"]["code"] == "signature_invalid"
                assert feed(address) == [], "nothing is appended on refusal"
                stranger = post(signed(kind, SECRETS[kind], body, now), url=address.inbox_url + "x")
                assert stranger.json()["error"]["code"] == "unauthorized", "a wrong inbox URL learns nothing more"
                accepted = post(signed(kind, SECRETS[kind], body, now))
                assert accepted.status_code == 202, (kind, accepted.text)
                (event,) = feed(address)
                assert (event["verified_by"], event["ingress_surface"]) == (kind, "http")
                assert event["data"] == json.loads(body)


def test_sdk_cli_and_mcp_show_content_type_kept_headers_and_verified_by(served: ServeProcess, tmp_path: Path):
    home = tmp_path / "cairn-home"
    env = {**os.environ, "CAIRN_HOME": str(home), "CAIRN_URL": served.base_url}

    def cli(*args: str) -> Any:
        return command_json(list(args), env)

    inbox_url = cli("provision", "hooks", "--expires-in", "3600")["inbox_url"]
    with Address.restore(TaskStore(home).address_path("hooks")) as address:
        assert address.keep_headers(["X-GitHub-Event", "X-GitHub-Delivery"])["inbox"]["keep_headers"] == [
            "x-github-event",
            "x-github-delivery",
        ]
        address.set_verifier("github", "gh-secret")
        body = b"payload=%7B%22ref%22%3A%22refs%2Fheads%2Fmain%22%7D"
        headers = {"Content-Type": FORM, "Authorization": "Bearer not-kept", **signatures.github("gh-secret", body)}
        assert httpx.post(inbox_url, content=body, headers=headers).status_code == 202
        with pytest.raises(SignatureInvalid):
            address.inbox.post({"type": "forged"})
        expected = {
            "content_type": FORM,
            "headers": {"x-github-event": "push", "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
            "verified_by": "github",
        }

        def shown(event: dict[str, Any]) -> dict[str, Any]:
            return {name: event[name] for name in expected}

        (from_sdk,) = feed(address)
        assert shown(from_sdk) == expected
        assert from_sdk["data"] == {"payload": '{"ref":"refs/heads/main"}'}
        (from_cli,) = cli("events", "poll", "hooks", "--after", "0")["events"]
        assert shown(from_cli) == expected

        async def from_mcp() -> dict[str, Any]:
            async with Client(f"{served.base_url}/mcp") as client:
                page = await client.call_tool(
                    "poll_events", {"address_id": address.id, "read_token": address.read_token, "after": 0}
                )
                return page.structured_content["events"][0]

        assert shown(anyio.run(from_mcp)) == expected
