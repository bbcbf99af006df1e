"""`cairn serve` over real HTTP, as agents use it."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.support.serve import ServeProcess

BEARER = "Authorization"


def provision(client: httpx.Client, **body) -> dict:
    reply = client.post("/api/v1/addresses", json=body)
    assert reply.status_code == 201, reply.text
    return reply.json()


def auth(created: dict) -> dict[str, str]:
    return {BEARER: f"Bearer {created['credentials']['read_token']}"}


def test_two_processes_hand_off_through_an_address(served: ServeProcess, tmp_path: Path):
    """Provision and deliver in one process; a later process resumes and acks."""
    saved = tmp_path / "address.json"
    first_run = textwrap.dedent(
        f"""
        import httpx, json, sys
        created = httpx.post("{served.base_url}/api/v1/addresses", json={{"task_id": "handoff"}}, timeout=10).json()
        open(sys.argv[1], "w").write(json.dumps(created))
        reply = httpx.post(created["endpoints"]["inbox_url"], json={{"type": "demo.callback", "data": {{"ok": 1}}}},
                           headers={{"Idempotency-Key": "handoff:callback"}}, timeout=10)
        assert reply.status_code == 202, reply.text
        token = {{"Authorization": "Bearer " + created["credentials"]["read_token"]}}
        saved = httpx.put(created["endpoints"]["state_url"] + "/plan", json={{"value": ["fetch", "render"]}},
                          headers=token, timeout=10)
        assert saved.status_code == 201, saved.text
        """
    )
    second_run = textwrap.dedent(
        """
        import httpx, json, sys
        created = json.load(open(sys.argv[1]))
        headers = {"Authorization": "Bearer " + created["credentials"]["read_token"]}
        page = httpx.get(created["endpoints"]["events_url"], params={"after": 0, "wait": 1}, headers=headers, timeout=10).json()
        event = page["events"][0]
        ack = httpx.post(created["endpoints"]["events_url"] + "/" + event["id"] + "/ack", headers=headers, timeout=10)
        plan = httpx.get(created["endpoints"]["state_url"] + "/plan", headers=headers, timeout=10).json()["value"]
        print(json.dumps({"type": event["type"], "data": event["data"], "ack": ack.status_code, "plan": plan}))
        """
    )
    subprocess.run([sys.executable, "-c", first_run, str(saved)], check=True, timeout=60)
    result = subprocess.run(
        [sys.executable, "-c", second_run, str(saved)], check=True, timeout=60, capture_output=True, text=True
    )
    assert json.loads(result.stdout) == {
        "type": "demo.callback",
        "data": {"ok": 1},
        "ack": 200,
        "plan": ["fetch", "render"],
    }
    created = json.loads(saved.read_text())
    with served.client() as client:
        page = client.get(created["endpoints"]["events_url"], params={"after": 0, "wait": 0}, headers=auth(created))
        events = page.json()["events"]
        assert [event["type"] for event in events] == ["demo.callback", "state.updated"]
        assert events[0]["acknowledged_at"]


def test_a_long_poll_wakes_as_soon_as_an_event_commits(served: ServeProcess):
    with served.client() as client:
        created = provision(client)
        result: dict = {}

        def long_poll() -> None:
            begun = time.monotonic()
            reply = client.get(created["endpoints"]["events_url"], params={"wait": 20}, headers=auth(created))
            result.update(reply=reply, elapsed=time.monotonic() - begun)

        poller = threading.Thread(target=long_poll)
        poller.start()
        time.sleep(0.5)
        client.post(created["endpoints"]["inbox_url"], json={"type": "wake.up"})
        poller.join(30)
    assert [event["type"] for event in result["reply"].json()["events"]] == ["wake.up"]
    # Before its own 20 s timeout: it woke on the commit (a busy machine may be slow, never that slow).
    assert result["elapsed"] < 20, "the poll waited for its timeout instead of waking"


def test_two_hundred_long_polls_wait_while_other_requests_are_answered(served: ServeProcess):
    # As many addresses as it takes for each to hold its most waiting polls (10 by default).
    addresses, per_address = 20, 10

    async def scenario() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=300, max_keepalive_connections=300)
        async with httpx.AsyncClient(base_url=served.base_url, timeout=40, limits=limits) as client:
            waiting = [(await client.post("/api/v1/addresses", json={})).json() for _ in range(addresses)]

            async def wait_for_an_event(created: dict) -> httpx.Response:
                # A poll that times out (on a slow machine) polls again: the waiter waits until an event.
                while True:
                    reply = await client.get(
                        created["endpoints"]["events_url"], params={"wait": 20}, headers=auth(created)
                    )
                    if reply.status_code != 200 or reply.json()["events"]:
                        return reply

            polls = [asyncio.create_task(wait_for_an_event(created)) for created in waiting for _ in range(per_address)]
            await asyncio.sleep(2.0)
            assert not any(poll.done() for poll in polls), "a poll returned before any event existed"
            for _ in range(5):
                assert (await client.get("/healthz")).status_code == 200
                other = (await client.post("/api/v1/addresses", json={})).json()
                assert (await client.post(other["endpoints"]["inbox_url"], json={})).status_code == 202
            # Every other request was answered while all the polls still waited: none is stuck behind them.
            assert not any(poll.done() for poll in polls), "a poll ended before its event existed"
            for created in waiting:
                await client.post(created["endpoints"]["inbox_url"], json={"type": "fan.out"})
            return await asyncio.gather(*polls)

    replies = asyncio.run(scenario())
    assert len(replies) == addresses * per_address
    assert [reply.status_code for reply in replies] == [200] * len(replies)
    assert all([event["type"] for event in reply.json()["events"]] == ["fan.out"] for reply in replies)


def open_to_others(data_dir: Path) -> list[str]:
    """What in the data directory a user other than its owner could read or change."""
    return [str(path) for path in [data_dir, *data_dir.rglob("*")] if path.stat().st_mode & 0o077]


def test_restart_keeps_addresses_and_events_for_their_owner_alone(tmp_path: Path):
    data_dir = tmp_path / "data"
    with ServeProcess(tmp_path, data_dir=data_dir, command_line=True) as server, server.client() as client:
        created = provision(client, task_id="survivor")
        assert client.post(created["endpoints"]["inbox_url"], json={"type": "before.restart"}).status_code == 202
        checkpoint = client.put(
            created["endpoints"]["state_url"] + "/checkpoint", json={"value": {"step": 7}}, headers=auth(created)
        )
        assert checkpoint.status_code == 201
    # The database holds every address's state and feed: other users of the machine read none of it.
    assert (data_dir / "shared-local-instance.db").exists()
    assert open_to_others(data_dir) == []
    # As an older `cairn serve` left them; the next start makes them owner-only again.
    for kept in ("shared-local-instance.db", "dynamodb-local.log"):
        (data_dir / kept).chmod(0o644)
    # A new server on the same data directory, on another port.
    with ServeProcess(tmp_path, data_dir=data_dir, command_line=True) as server, server.client() as client:
        assert open_to_others(data_dir) == []
        events_path = "/api/v1/addresses/" + created["address"]["id"] + "/events"
        page = client.get(events_path, headers=auth(created)).json()
        assert [event["type"] for event in page["events"]] == ["before.restart", "state.updated"]
        state_path = urlsplit(created["endpoints"]["state_url"]).path
        saved = client.get(state_path + "/checkpoint", headers=auth(created)).json()
        assert (saved["value"], saved["revision"]) == ({"step": 7}, 1)
        inbox_path = urlsplit(created["endpoints"]["inbox_url"]).path
        assert client.post(inbox_path, json={"type": "after.restart"}).json()["event"]["sequence"] == 3


def test_ctrl_c_stops_the_server_and_dynamodb_local(tmp_path: Path):
    server = ServeProcess(tmp_path, data_dir=tmp_path / "data", command_line=True).start()
    dynamodb_line = next(line for line in server.output if line.startswith("DynamoDB Local on"))
    dynamodb_port = int(dynamodb_line.split(":")[2].split(",")[0])
    assert server.stop() == 0
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", dynamodb_port)) != 0, "DynamoDB Local still listens"
        assert probe.connect_ex(("127.0.0.1", server.port)) != 0


def test_a_relative_data_folder_is_the_one_under_the_folder_serve_was_started_in(tmp_path: Path):
    """`cairn serve` in a new folder with its default `.cairn/data` (a relative path) keeps its data there."""
    server = ServeProcess(tmp_path, data_dir=Path(".cairn/data"), cwd=tmp_path, command_line=True).start()
    try:
        with server.client() as client:
            assert client.get("/healthz").status_code == 200
            provision(client)
    finally:
        assert server.stop() == 0
    assert list((tmp_path / ".cairn" / "data").glob("*.db")), "DynamoDB Local kept nothing under .cairn/data"


def test_demo_verification_errors_are_json(served: ServeProcess):
    """The AgentAddress two-run demo's checks: bad token 401 and oversize 413, both JSON."""
    with served.client() as client:
        created = provision(client)
        unauthorized = client.get(created["endpoints"]["events_url"], headers={BEARER: "Bearer wrong"})
        assert unauthorized.status_code == 401
        assert unauthorized.json()["error"]["code"] == "unauthorized"
        oversize = client.post(created["endpoints"]["inbox_url"], json={"data": "x" * 1_000_001})
        assert oversize.status_code == 413
        assert oversize.json()["error"]["code"] == "payload_too_large"
        skill = client.get("/skill.md").text
        assert f"{served.base_url}/api/v1/addresses" in skill


def test_many_concurrent_posters_over_http_lose_nothing(served: ServeProcess):
    with served.client() as client:
        created = provision(client)

    def post_all(writer: int) -> list[int]:
        with httpx.Client(timeout=30) as client:
            return [
                client.post(created["endpoints"]["inbox_url"], json={"data": {"w": writer, "n": n}}).json()["event"][
                    "sequence"
                ]
                for n in range(25)
            ]

    with ThreadPoolExecutor(max_workers=8) as pool:
        sequences = sorted(seq for seqs in pool.map(post_all, range(8)) for seq in seqs)
    assert sequences == list(range(1, 201))
    with served.client() as client:
        page = client.get(created["endpoints"]["events_url"], params={"limit": 1000}, headers=auth(created)).json()
    assert [event["sequence"] for event in page["events"]] == list(range(1, 201))


def test_a_setting_out_of_bounds_stops_the_server_with_its_reason(tmp_path: Path):
    started = subprocess.run(
        [
            sys.executable,
            "-m",
            "cairn.cli",
            "serve",
            "--dynamodb-endpoint",
            "http://127.0.0.1:9",
            "--data-dir",
            str(tmp_path),
        ],
        env={**os.environ, "CAIRN_MAX_EVENTS": "100001"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2
    assert "cairn serve: setting max_events" in started.stderr
    assert "<= 100000" in started.stderr
    assert "Traceback" not in started.stderr
