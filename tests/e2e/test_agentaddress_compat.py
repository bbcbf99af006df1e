"""The public AgentAddress client's flow, unchanged, against `cairn serve`.

Every request below is shaped as the public CLI (`agentaddress.mjs`) sends
it: it keeps only the origin of `AGENTADDRESS_URL`, provisions with
`{name, task_id, expires_in_seconds}`, takes every later URL from the
creation answer (the address root is `events_url` minus `/events`), sends
the expected revision of a write in the body and of a delete as a bare
`If-Match` number, and reads only `error.code` and `Retry-After` from errors.
"""

from __future__ import annotations

import json
import re
import smtplib
from email.message import EmailMessage
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from cairn.local.dynamodb_local import DynamoDBLocal
from tests.support.serve import ServeProcess

ID = re.compile(r"[A-Za-z0-9_-]{1,200}")
TIMEOUT = 35.0  # the CLI's AbortSignal.timeout(35000)


def test_the_public_client_flow_works_unchanged(served: ServeProcess):
    agentaddress_url = served.base_url + "/any/path/is/dropped"
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(agentaddress_url))
    task = "compat-task"
    json_headers = {"Content-Type": "application/json"}

    with httpx.Client(timeout=TIMEOUT) as http:
        # create
        created = http.post(
            f"{origin}/api/v1/addresses",
            json={"name": task, "task_id": task, "expires_in_seconds": 3600},
            headers=json_headers,
        )
        assert created.status_code == 201
        body = created.json()
        token = body["credentials"]["read_token"]
        events_url = body["endpoints"]["events_url"]
        inbox_url = body["endpoints"]["inbox_url"]
        assert body["address"]["email"] and body["address"]["expiresAt"]
        assert events_url.startswith(origin) and events_url.endswith("/events")
        root = events_url.removesuffix("/events")
        bearer = {"Authorization": f"Bearer {token}"}

        # deliver (no Authorization: the URL is the capability), twice with one key
        callback = {"type": "demo.callback", "source": "compat", "data": {"ok": True}}
        delivered = http.post(inbox_url, json=callback, headers={**json_headers, "Idempotency-Key": f"{task}:callback"})
        assert delivered.status_code == 202
        assert delivered.json()["duplicate"] is False
        again = http.post(inbox_url, json=callback, headers={**json_headers, "Idempotency-Key": f"{task}:callback"})
        assert again.status_code == 200
        assert again.json()["duplicate"] is True
        assert again.json()["event"]["id"] == delivered.json()["event"]["id"]

        # poll and ack
        page = http.get(events_url, params={"after": 0, "wait": 1}, headers=bearer)
        assert page.status_code == 200
        [event] = page.json()["events"]
        assert (event["type"], event["sequence"], page.json()["next_cursor"]) == ("demo.callback", 1, 1)
        assert ID.fullmatch(event["id"])
        acked = http.post(f"{events_url}/{event['id']}/ack", headers=bearer)
        assert acked.status_code == 200
        assert isinstance(acked.json()["event"]["sequence"], int)
        assert http.post(f"{events_url}/{event['id']}/ack", headers=bearer).status_code == 200
        verify = http.get(events_url, params={"after": 0, "wait": 0}, headers=bearer).json()["events"]
        assert len(verify) == 1 and verify[0]["acknowledged_at"]
        assert http.get(events_url, params={"after": 1, "wait": 0}, headers=bearer).json()["events"] == []

        # state-set / state-get / state-keys / state-delete
        state_key = f"{root}/state/progress"
        writing = {**json_headers, **bearer}
        created_key = http.put(state_key, json={"value": {"step": 1}, "if_revision": 0}, headers=writing)
        assert created_key.status_code in (200, 201)
        stale = http.put(state_key, json={"value": {"step": 9}, "if_revision": 0}, headers=writing)
        assert stale.status_code == 409
        assert stale.json()["error"]["code"]
        moved = http.put(state_key, json={"value": {"step": 2}, "if_revision": 1}, headers=writing)
        assert moved.json()["revision"] == 2
        read = http.get(state_key, headers=bearer).json()
        assert (read["key"], read["value"], read["revision"]) == ("progress", {"step": 2}, 2)
        assert http.get(f"{root}/state", headers=bearer).status_code == 200
        assert http.delete(state_key, headers={**bearer, "If-Match": "1"}).status_code == 409
        assert http.delete(state_key, headers={**bearer, "If-Match": "2"}).status_code == 200
        assert http.get(state_key, headers=bearer).status_code == 404

        # a bad bearer: 401 with a JSON error body
        refused = http.get(events_url, headers={"Authorization": "Bearer crt_not_the_token"})
        assert refused.status_code == 401
        assert refused.headers["content-type"].startswith("application/json")
        assert refused.json()["error"]["code"] == "unauthorized"


def _mailbox(value: str) -> str:
    """The address in `Name <addr>` or a bare address, lower-cased, as AgentAddress's email examples read it."""
    found = re.search(r"<([^<>]+)>$", value.strip())
    return (found.group(1) if found else value.strip()).lower()


def test_only_mail_carries_the_mail_surface_an_agent_checks(
    dynamodb_local: DynamoDBLocal, streamed_table: str, tmp_path: Path
):
    # A deployment moving from AgentAddress names mail's surface as its agents expect.
    env = {"CAIRN_EMAIL_INGRESS_SURFACE": "resend"}
    with (
        ServeProcess(tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, env=env) as served,
        httpx.Client(timeout=TIMEOUT) as http,
    ):
        body = http.post(f"{served.base_url}/api/v1/addresses", json={"name": "verify", "task_id": "verify"}).json()
        email = body["address"]["email"]
        events_url = body["endpoints"]["events_url"]
        bearer = {"Authorization": f"Bearer {body['credentials']['read_token']}"}

        # A forger holding the inbox URL writes everything a mail event shows.
        forged = {
            "type": "email.received",
            "source": "resend",
            "ingress_surface": "resend",
            "data": {"from": "bank@example.com", "to": [email], "subject": "Your code", "text": "123456"},
        }
        assert http.post(body["endpoints"]["inbox_url"], json=forged).status_code == 202
        message = EmailMessage()
        message["From"] = "Bank <bank@example.com>"
        message["To"] = email
        message["Subject"] = "Your code"
        message.set_content("Your code is 654321")
        with smtplib.SMTP("127.0.0.1", served.smtp_port, timeout=10) as smtp:
            smtp.send_message(message)
        http.put(f"{events_url.removesuffix('/events')}/state/step", json={"value": 1}, headers=bearer)

        page = http.get(events_url, params={"after": 0, "wait": 5}, headers=bearer).json()
        while len(page["events"]) < 3:
            more = http.get(events_url, params={"after": page["next_cursor"], "wait": 5}, headers=bearer).json()
            page = {"events": page["events"] + more["events"], "next_cursor": more["next_cursor"]}
        by_surface = {event["ingress_surface"]: event for event in page["events"]}
        assert sorted(by_surface) == ["http", "resend", "state"]
        assert (by_surface["http"]["type"], by_surface["http"]["source"]) == ("email.received", "resend")
        assert by_surface["state"]["type"] == "state.updated"
        # What AgentAddress's email examples check before they act (examples/shared/verified-email.mjs).
        mail = by_surface["resend"]
        assert (mail["type"], mail["source"]) == ("email.received", "resend")
        assert _mailbox(mail["data"]["from"]) == "bank@example.com"
        assert email.lower() in [_mailbox(recipient) for recipient in mail["data"]["to"]]
        assert "your code" in mail["data"]["subject"].lower()
        openapi = http.get(f"{served.base_url}/openapi.json").json()
        assert "ingress_surface" in openapi["components"]["schemas"]["EventOut"]["required"]
        assert "`resend`" in http.get(f"{served.base_url}/skill.md").text


def test_the_public_client_mail_commands_work_unchanged(served: ServeProcess, tmp_path: Path):
    """`contacts`, `contact <email> [code]` and `send <message.json> <key>`, as `agentaddress.mjs` sends them.

    The CLI's `privateRequest`: the address root from `events_url`, the read
    token as Bearer, `content-type: application/json` only with a body, the
    message file's JSON as the body and the key in a lower-case
    `idempotency-key` header; any 2xx answer is success.
    """
    person = "approver@example.org"
    with httpx.Client(timeout=TIMEOUT) as http:
        body = http.post(
            f"{served.base_url}/api/v1/addresses",
            json={"name": "mail-task", "task_id": "mail-task"},
            headers={"content-type": "application/json"},
        ).json()
        root = body["endpoints"]["events_url"].removesuffix("/events")
        bearer = {"authorization": f"Bearer {body['credentials']['read_token']}"}
        with_body = {"content-type": "application/json", **bearer}

        # contacts
        listed = http.get(f"{root}/email/contacts", headers=bearer)
        assert listed.status_code == 200
        assert listed.json() == {"contacts": [], "outbound_configured": True}

        # contact <email>: the code goes to the person (here: the outbox of `cairn serve`), never to the agent
        asked = http.post(f"{root}/email/contacts", content=json.dumps({"email": person}), headers=with_body)
        assert asked.is_success and asked.json()["status"] == "pending"
        [mail] = (tmp_path / "data" / "outbox").glob("*.eml")
        code = re.search(rb"code is: (\d{6})", mail.read_bytes()).group(1).decode()
        assert code not in asked.text

        # contact <email> <code>
        verified = http.post(
            f"{root}/email/contacts", content=json.dumps({"email": person, "code": code}), headers=with_body
        )
        assert verified.is_success and verified.json()["status"] == "verified"

        # send <message.json> <idempotency-key>
        message = {"to": person, "subject": "Approve the deploy?", "text": "Reply APPROVE or REJECT."}
        key = "deploy-approval-1"
        sent = http.post(
            f"{root}/email/send", content=json.dumps(message), headers={**with_body, "idempotency-key": key}
        )
        assert sent.is_success and sent.json()["status"] == "accepted"
        retried = http.post(
            f"{root}/email/send", content=json.dumps(message), headers={**with_body, "idempotency-key": key}
        )
        assert retried.is_success and retried.json()["message_id"] == sent.json()["message_id"]
        assert len(list((tmp_path / "data" / "outbox").glob("*.eml"))) == 2

        # What the CLI reads of a refusal: `error.code`.
        stranger = http.post(
            f"{root}/email/send",
            content=json.dumps({**message, "to": "someone@example.org"}),
            headers={**with_body, "idempotency-key": "other-1"},
        )
        assert stranger.status_code == 422 and stranger.json()["error"]["code"] == "unknown_recipient"
