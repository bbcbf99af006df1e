"""What a web page in the user's browser can do to `cairn serve`, over real HTTP.

The runtime, product-memory and MCP routes serve workers and tools: a page of
another origin gets no CORS grant, no successful preflight, and a refusal for
any request it manages to send, so it can neither read nor write them. A
page reaching the server under a name an attacker points at 127.0.0.1 (DNS
rebinding) is refused by its `Host`. Address routes keep CORS: their
credentials travel in headers, so a page can only use a token it holds.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from cairn.local.dynamodb_local import DynamoDBLocal
from tests.support.serve import ServeProcess

EVIL = "http://evil.example"
SESSION = {"session_id": "browser-reach", "created_at": "2026-01-01T00:00:00.000Z"}
WORKER_POSTS = [
    ("/api/v1/runtime/create_session", SESSION),
    ("/api/v1/memory/agent/runs/run/events", {"events": [{"type": "planner_note", "data": {"note": "x"}}]}),
    ("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"}),
]


def nothing_was_written(client: httpx.Client) -> bool:
    session = client.post("/api/v1/runtime/load_session", json={"session_id": "browser-reach"})
    memory = client.get("/api/v1/memory/agent/runs/run/events")
    return session.status_code == 404 and memory.json()["events"] == []


@pytest.mark.parametrize(("path", "body"), WORKER_POSTS, ids=["runtime", "memory", "mcp"])
def test_a_page_of_another_origin_can_neither_preflight_nor_send(served: ServeProcess, path: str, body: dict):
    with served.worker_client() as client:
        preflight = client.options(
            path,
            headers={
                "Origin": EVIL,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type",
            },
        )
        assert preflight.status_code == 403
        assert preflight.json()["error"]["code"] == "cross_origin_refused"
        assert "access-control-allow-origin" not in preflight.headers
        # A "simple" request needs no preflight: sent anyway, as a form or as text.
        simple = client.post(path, content=b"{}", headers={"Origin": EVIL, "Content-Type": "text/plain"})
        assert simple.status_code == 403 and "access-control-allow-origin" not in simple.headers
        declared = client.post(path, json=body, headers={"Origin": EVIL})
        assert declared.status_code == 403 and declared.json()["error"]["code"] == "cross_origin_refused"
        for unreadable in ("http://[", "a]b"):  # an origin no browser sends shows no page of this one
            odd = client.post(path, json=body, headers={"Origin": unreadable})
            assert odd.status_code == 403 and odd.json()["error"]["code"] == "cross_origin_refused"
        assert nothing_was_written(client)


@pytest.mark.parametrize(("path", "body"), WORKER_POSTS[:2], ids=["runtime", "memory"])
def test_worker_routes_take_json_only_and_grant_no_cors(served: ServeProcess, path: str, body: dict):
    with served.worker_client() as client:
        untyped = client.post(path, content=httpx.Request("POST", "/", json=body).content)
        text = client.post(
            path, content=httpx.Request("POST", "/", json=body).content, headers={"Content-Type": "text/plain"}
        )
        for refused in (untyped, text):
            assert refused.status_code == 415 and refused.json()["error"]["code"] == "unsupported_media_type"
        assert nothing_was_written(client)
        accepted = client.post(path, json=body)
        assert accepted.status_code in (200, 201), accepted.text
        assert "access-control-allow-origin" not in accepted.headers


def test_address_routes_keep_cors_for_pages_holding_a_token(served: ServeProcess):
    with served.worker_client() as client:
        preflight = client.options(
            "/api/v1/addresses", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"}
        )
        assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"
        created = client.post("/api/v1/addresses", json={}, headers={"Origin": EVIL})
        assert created.status_code == 201 and created.headers["access-control-allow-origin"] == "*"


def test_a_rebound_host_name_is_refused_and_local_names_are_served(served: ServeProcess):
    with served.worker_client() as client:
        rebound = client.get("/healthz", headers={"Host": f"evil.example:{served.port}"})
        assert rebound.status_code == 421 and rebound.json()["error"]["code"] == "host_not_allowed"
        posted = client.post("/api/v1/runtime/create_session", json=SESSION, headers={"Host": "evil.example"})
        assert posted.status_code == 421 and nothing_was_written(client)
        # A Host whose host part passes but that carries more: it would go into the URLs answers hand out.
        for smuggled in (f"evil.example\\@127.0.0.1:{served.port}", "localhost/evil", "localhost#x", "evil@localhost"):
            created = client.post("/api/v1/addresses", json={}, headers={"Host": smuggled})
            assert created.status_code == 421, (smuggled, created.text)
        for unreadable in ("[", "[::1", "a]b"):
            odd = client.get("/healthz", headers={"Host": unreadable})
            assert odd.status_code == 421 and odd.json()["error"]["code"] == "host_not_allowed", unreadable
        for host in (f"localhost:{served.port}", f"127.0.0.1:{served.port}", "[::1]"):
            assert client.get("/healthz", headers={"Host": host}).status_code == 200, host


def test_forwarded_headers_are_ignored_unless_a_proxy_is_trusted(
    dynamodb_local: DynamoDBLocal, streamed_table: str, tmp_path: Path
):
    """Any local client could claim another IP (escaping the create limit) or a `javascript:` scheme for URLs."""
    env = {"CAIRN_CREATE_RATE_PER_MINUTE": "2"}
    with ServeProcess(tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, env=env) as server:
        with server.client() as client:
            spoofed = {"X-Forwarded-For": "203.0.113.1", "X-Forwarded-Proto": "javascript"}
            created = client.post("/api/v1/addresses", json={}, headers=spoofed)
            assert created.status_code == 201
            assert all(url.startswith(server.base_url) for url in created.json()["endpoints"].values())
            assert (
                client.post("/api/v1/addresses", json={}, headers={"X-Forwarded-For": "203.0.113.2"}).status_code == 201
            )
            third = client.post("/api/v1/addresses", json={}, headers={"X-Forwarded-For": "203.0.113.3"})
            assert third.status_code == 429, "one client, whatever it claims"
            for document in ("/skill.md", "/openapi.json", "/llms.txt"):
                assert "javascript:" not in client.get(document, headers=spoofed).text
