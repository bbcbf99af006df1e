"""Isolation and secrets over real HTTP: what one credential can and cannot open.

Tokens and inbox secrets are stored only as SHA-256 digests; a credential
opens its own address and nothing else; every refusal looks the same, so a
prober learns nothing about which ids exist.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from cairn.dynamodb.client import make_client
from cairn.local.dynamodb_local import DynamoDBLocal
from cairn.settings import Settings
from tests.support.serve import ServeProcess

PLACEHOLDER = re.compile(r"\{(\w+)\}")


def provision(client: httpx.Client, task: str) -> dict:
    reply = client.post("/api/v1/addresses", json={"task_id": task})
    assert reply.status_code == 201, reply.text
    return reply.json()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def read_token(created: dict) -> str:
    return created["credentials"]["read_token"]


def inbox_secret(created: dict) -> str:
    return created["endpoints"]["inbox_url"].rsplit("/", 1)[-1]


def full_flow(client: httpx.Client, created: dict) -> str:
    """Every kind of write an address sees; returns the id of its first event."""
    inbox = urlsplit(created["endpoints"]["inbox_url"]).path
    state = urlsplit(created["endpoints"]["state_url"]).path
    events = urlsplit(created["endpoints"]["events_url"]).path
    token = bearer(read_token(created))
    assert (
        client.post(inbox, json={"type": "demo", "data": {"n": 1}}, headers={"Idempotency-Key": "k1"}).status_code
        == 202
    )
    assert client.post(inbox, json={"type": "demo", "data": {"n": 2}}).status_code == 202
    assert client.put(f"{state}/plan", json={"value": ["fetch"]}, headers=token).status_code == 201
    batch = {"operations": [{"key": "a", "op": "set", "value": 1}, {"key": "b", "op": "set", "value": 2}]}
    assert client.post(state, json=batch, headers=token).status_code == 200
    first = client.get(events, params={"after": 0}, headers=token).json()["events"][0]["id"]
    assert client.post(f"{events}/{first}/ack", headers=token).status_code == 200
    return first


def snapshot(client: httpx.Client, created: dict) -> tuple[dict, dict, dict]:
    token = bearer(read_token(created))
    state = client.get(urlsplit(created["endpoints"]["state_url"]).path, headers=token)
    feed = client.get(urlsplit(created["endpoints"]["events_url"]).path, params={"after": 0}, headers=token)
    inbox = client.get(f"{urlsplit(created['endpoints']['address_url']).path}/inbox", headers=token)
    assert state.status_code == feed.status_code == inbox.status_code == 200
    return state.json(), feed.json(), inbox.json()


def address_routes(client: httpx.Client) -> list[tuple[str, str]]:
    """Every (method, path template) of the published document that acts on one address."""
    document = client.get("/openapi.json").json()
    routes = [
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
        if "{address_id}" in path
    ]
    assert len(routes) >= 12, routes
    return routes


def request_for(method: str, template: str, values: dict[str, str], credential: dict[str, str]) -> dict:
    """A well-formed request for the route, so only the credential can be the reason for a refusal."""
    path = PLACEHOLDER.sub(lambda match: values[match.group(1)], template)
    body = None
    headers = dict(credential)
    params: dict | None = None
    if "/checkpoints" in template:
        body, params = checkpoint_request(method, template)
    elif template.endswith("/store/batch"):
        body = {"ops": [{"op": "put", "namespace": ["stolen"], "key": "k", "value": {"stolen": True}}]}
    elif "/strands/" in template or "/files" in template:
        body = strands_request(method, template)
    elif "/sessions/" in template:
        body = (
            {"items": [{"role": "user", "content": "stolen"}]}
            if template.endswith(("/items", "/items/replace")) and method == "POST"
            else None
        )
    elif template.endswith("/state") and method == "POST":
        body = {"operations": [{"key": "plan", "op": "set", "value": "stolen"}]}
    elif method == "PUT" and "/inbox/verifiers/" in template:
        body = {"secret": "stolen"}
    elif method == "PUT":
        body = {"value": "stolen"}
    elif method == "PATCH":
        body = {"inbox": {"keep_headers": ["x-stolen"]}}
    elif template.endswith("/email/replay"):
        body = {"message_id": "a" * 40}
    elif template.startswith("/api/v1/inbox/"):
        body = {"type": "forged"}
    elif template.endswith("/email/contacts") and method == "POST":
        body = {"email": "stolen@example.org"}
    elif template.endswith("/email/send"):
        body = {"to": "stolen@example.org", "subject": "stolen", "text": "stolen"}
        headers["Idempotency-Key"] = "stolen"
    elif template.endswith("/subscriptions") and method == "POST":
        body = {"target": {"kind": "webhook", "url": "https://hooks.example.com/stolen"}}
    if method == "DELETE" and template.endswith("/events"):
        params = {"through": 10**6, "include_unacknowledged": "true"}  # a trim names how far it goes
    return {"method": method, "url": path, "json": body, "params": params, "headers": headers}


def strands_request(method: str, template: str) -> dict | None:
    """A well-formed body for each Strands session route, and each file route (`CairnStorage`)."""
    if "/files" in template:
        written = {"key": "stolen", "data": "c3RvbGVu"} if template.endswith("/files") else {"key": "stolen"}
        return {} if template.endswith("/list") else written
    claim = {"if_version": 1, "writer": "stolen"}
    if method == "GET":
        return None
    if template.endswith("/release"):
        return {"writer": "stolen"}
    if "/messages" in template:
        return {"message": {"message_id": 0, "message": {"role": "user"}}, **claim}
    if template.endswith("/{session_id}"):
        return {"session": {"session_id": "stolen"}}
    return {"value": {"stolen": True}, **({} if method == "POST" else claim)}


def checkpoint_request(method: str, template: str) -> tuple[dict | None, dict | None]:
    """A well-formed body (or query) for each LangGraph checkpoint route."""
    thread = {"thread_id": "stolen", "checkpoint_ns": ""}
    blob = {"type": "json", "data": "e30="}
    if template.endswith("/parts/{digest}"):
        return (
            ({"thread_id": "stolen", "data": "c3RvbGVu"}, None) if method == "PUT" else (None, {"thread_id": "stolen"})
        )
    if method == "DELETE":
        return None, {"thread_id": "stolen"}
    if template.endswith("/writes/search"):
        return {**thread, "checkpoint_id": "c1", "after": "c1"}, None
    if template.endswith("/writes"):
        write = {"idx": 0, "channel": "stolen", "value": blob}
        return {**thread, "checkpoint_id": "c1", "task_id": "t1", "writes": [write]}, None
    if template.endswith("/search"):
        return {"thread_id": "stolen"}, None
    if template.endswith("/copy"):
        return {"source_thread_id": "stolen", "target_thread_id": "stolen-copy"}, None
    if template.endswith("/prune"):
        return {"thread_ids": ["stolen"], "strategy": "delete"}, None
    if template.endswith("/runs/delete"):
        return {"run_ids": ["stolen"]}, None
    return {**thread, "checkpoint_id": "c1", "checkpoint": blob}, None


def scan_text(dynamodb_endpoint: str, table: str) -> str:
    """Every attribute of every item in the table, as one searchable text (binary values decoded)."""
    client = make_client(Settings(dynamodb_endpoint=dynamodb_endpoint))
    items = []
    for page in client.get_paginator("scan").paginate(TableName=table):
        items.extend(page["Items"])
    assert items
    return json.dumps(items, default=lambda value: value.decode("latin-1") if isinstance(value, bytes) else str(value))


def test_the_table_holds_no_read_token_or_inbox_secret_in_plaintext(
    served: ServeProcess, dynamodb_local: DynamoDBLocal, streamed_table: str
):
    with served.client() as client:
        addresses = [provision(client, f"scan-{n}") for n in range(3)]
        for created in addresses:
            full_flow(client, created)
        provision_then_delete = provision(client, "deleted")
        deleted = client.delete(
            f"/api/v1/addresses/{provision_then_delete['address']['id']}",
            headers=bearer(read_token(provision_then_delete)),
        )
        assert deleted.status_code == 200
    text = scan_text(dynamodb_local.endpoint, streamed_table)
    for created in [*addresses, provision_then_delete]:
        assert read_token(created) not in text
        assert inbox_secret(created) not in text
        # The token without its `crt_` prefix is the secret part: it must not appear either.
        assert read_token(created).removeprefix("crt_") not in text
    assert addresses[0]["address"]["id"] in text, "the scan does see the addresses"


def test_a_token_for_one_address_opens_no_route_of_another(served: ServeProcess):
    with served.client() as client:
        mine, theirs = provision(client, "a"), provision(client, "b")
        their_event = full_flow(client, theirs)
        before = snapshot(client, theirs)
        values = {
            "address_id": theirs["address"]["id"],
            "event_id": their_event,
            "key": "plan",
            "attachment_id": "att_1",
            "kind": "github",
            "subscription_id": "sub_" + "0" * 24,
            "email": "stolen@example.org",
            "secret": inbox_secret(mine),
            "digest": hashlib.sha256(b"stolen").hexdigest(),
            "session_id": "stolen",
            "record_id": "stolen",
            "message_id": "0",
        }
        for method, template in address_routes(client):
            reply = client.request(**request_for(method, template, values, bearer(read_token(mine))))
            assert reply.status_code == 401, (method, template, reply.text)
            assert reply.json()["error"]["code"] == "unauthorized"
        # My inbox secret does not open their inbox either.
        forged = client.post(f"/api/v1/inbox/{theirs['address']['id']}/{inbox_secret(mine)}", json={"type": "forged"})
        assert forged.status_code == 401
        assert snapshot(client, theirs) == before


def test_the_inbox_secret_cannot_read_or_change_its_own_address(served: ServeProcess):
    with served.client() as client:
        created = provision(client, "writer")
        event = full_flow(client, created)
        before = snapshot(client, created)
        values = {
            "address_id": created["address"]["id"],
            "event_id": event,
            "key": "plan",
            "attachment_id": "att_1",
            "kind": "github",
            "subscription_id": "sub_" + "0" * 24,
            "email": "stolen@example.org",
            "secret": inbox_secret(created),
            "digest": hashlib.sha256(b"stolen").hexdigest(),
            "session_id": "stolen",
            "record_id": "stolen",
            "message_id": "0",
        }
        for method, template in address_routes(client):
            if template.startswith("/api/v1/inbox/"):
                continue  # the one route the secret is for
            reply = client.request(**request_for(method, template, values, bearer(inbox_secret(created))))
            assert reply.status_code == 401, (method, template, reply.text)
        assert snapshot(client, created) == before


def test_unknown_wrong_deleted_and_missing_credentials_are_indistinguishable(served: ServeProcess):
    with served.client() as client:
        live, gone = provision(client, "live"), provision(client, "gone")
        assert (
            client.delete(f"/api/v1/addresses/{gone['address']['id']}", headers=bearer(read_token(gone))).status_code
            == 200
        )
        probes = {
            "wrong token": (live["address"]["id"], bearer("crt_" + "x" * 43)),
            "another address's token": (live["address"]["id"], bearer(read_token(gone))),
            "no token": (live["address"]["id"], {}),
            "not bearer": (live["address"]["id"], {"Authorization": f"Basic {read_token(live)}"}),
            "unknown id": ("addr_" + "a" * 26, bearer(read_token(live))),
            "deleted id": (gone["address"]["id"], bearer(read_token(gone))),
            "malformed id": ("addr_" + "a" * 4_000, bearer(read_token(live))),
        }
        for suffix in ("", "/events", "/state", "/state/plan"):
            answers = {}
            for name, (address_id, headers) in probes.items():
                reply = client.get(f"/api/v1/addresses/{address_id}{suffix}", headers=headers)
                answers[name] = (reply.status_code, reply.headers.get("content-type"), reply.content)
            assert len(set(answers.values())) == 1, (suffix, answers)
            assert next(iter(answers.values()))[0] == 401
        # The inbox answers an unknown address and a wrong secret with the same bytes, too.
        wrong_secret = client.post(f"/api/v1/inbox/{live['address']['id']}/{'x' * 43}", json={})
        unknown = client.post(f"/api/v1/inbox/addr_{'a' * 26}/{inbox_secret(live)}", json={})
        deleted = client.post(urlsplit(gone["endpoints"]["inbox_url"]).path, json={})
        assert wrong_secret.status_code == unknown.status_code == deleted.status_code == 401
        assert wrong_secret.content == unknown.content == deleted.content


@pytest.fixture
def keyed_server(dynamodb_local: DynamoDBLocal, streamed_table: str, tmp_path: Path):
    with ServeProcess(
        tmp_path,
        dynamodb_endpoint=dynamodb_local.endpoint,
        table=streamed_table,
        extra_args=["--runtime-key", "s3cret"],
    ) as server:
        yield server


def test_every_runtime_and_memory_route_needs_the_runtime_key(keyed_server: ServeProcess):
    """tests/e2e/test_runtime_http.py checks one route; this walks all the document lists."""
    with keyed_server.client() as client:
        created = provision(client, "not-a-worker")
        document = client.get("/openapi.json").json()
        routes = [
            (method.upper(), PLACEHOLDER.sub("x", path))
            for path, operations in document["paths"].items()
            for method in operations
            if path.startswith(("/api/v1/runtime/", "/api/v1/memory/"))
        ]
        assert len(routes) >= 20
        for headers in ({}, bearer("wrong"), bearer(read_token(created)), bearer(inbox_secret(created))):
            for method, path in routes:
                reply = client.request(method, path, json={} if method == "POST" else None, headers=headers)
                assert reply.status_code == 401, (method, path, headers, reply.text)
                assert reply.json()["error"]["code"] == "unauthorized"


def test_rate_limits_answer_429_with_retry_after(dynamodb_local: DynamoDBLocal, streamed_table: str, tmp_path: Path):
    """Recovery after the one-minute window is proven with a fake clock in tests/unit/test_address_api.py."""
    env = {"CAIRN_POLL_RATE_PER_MINUTE": "3", "CAIRN_CREATE_RATE_PER_MINUTE": "3"}
    with ServeProcess(tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, env=env) as server:
        with server.client() as client:
            addresses = [provision(client, f"limit-{n}") for n in range(3)]
            refused = client.post("/api/v1/addresses", json={})
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "rate_limited"
            assert 1 <= int(refused.headers["Retry-After"]) <= 60

            events = urlsplit(addresses[0]["endpoints"]["events_url"]).path
            token = bearer(read_token(addresses[0]))
            for _ in range(3):
                assert client.get(events, headers=token).status_code == 200
            limited = client.get(events, headers=token)
            assert limited.status_code == 429
            assert limited.json()["error"]["code"] == "rate_limited"
            assert 1 <= int(limited.headers["Retry-After"]) <= 60
            # The limit is per address: another address still polls.
            other = urlsplit(addresses[1]["endpoints"]["events_url"]).path
            assert client.get(other, headers=bearer(read_token(addresses[1]))).status_code == 200
