"""`cairn serve` killed mid-load (SIGKILL) and restarted on the same data:
nothing it acknowledged is lost, and nothing is applied twice."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.support.serve import ServeProcess, wait_until

WRITERS = 4
MAX_ROUNDS = 500
KILL_AFTER_ACKNOWLEDGED = 80
# The load is waited on while it makes progress, however slowly the machine runs it; only a
# stretch this long with no new acknowledgement means the writers are stuck.
STALL_SECONDS = 60.0
MAX_CAS_ATTEMPTS = 50


@dataclass
class Ledger:
    """What the clients were told, kept apart from what they could not learn."""

    delivered: list[tuple[int, int]] = field(default_factory=list)
    unanswered: list[tuple[int, int]] = field(default_factory=list)
    increments: int = 0
    unanswered_increments: int = 0
    # A failed assertion in a writer thread would vanish with the thread; it is kept here instead.
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def acknowledged(self) -> int:
        return len(self.delivered) + self.increments


def path_of(url: str) -> str:
    return urlsplit(url).path


def auth(created: dict) -> dict[str, str]:
    return {"Authorization": f"Bearer {created['credentials']['read_token']}"}


def deliver(client: httpx.Client, created: dict, writer: int, round_: int) -> httpx.Response:
    return client.post(
        path_of(created["endpoints"]["inbox_url"]),
        json={"type": "job.done", "data": {"writer": writer, "round": round_}},
        headers={"Idempotency-Key": f"job-{writer}-{round_}"},
    )


def counter_url(created: dict) -> str:
    return path_of(created["endpoints"]["state_url"]) + "/counter"


def increment(client: httpx.Client, created: dict) -> bool:
    """One compare-and-set increment, re-read and retried on conflict; True once acknowledged."""
    for _ in range(MAX_CAS_ATTEMPTS):
        current = client.get(counter_url(created), headers=auth(created)).json()
        body = {"value": current["value"] + 1, "if_revision": current["revision"]}
        reply = client.put(counter_url(created), json=body, headers=auth(created))
        if reply.is_success:
            return True
        assert reply.status_code == 409, reply.text
    raise AssertionError("an increment lost the race fifty times in a row")


def write_until_the_server_dies(base_url: str, created: dict, writer: int, ledger: Ledger) -> None:
    try:
        write(base_url, created, writer, ledger)
    except AssertionError as failure:
        with ledger.lock:
            ledger.failures.append(str(failure))


def write(base_url: str, created: dict, writer: int, ledger: Ledger) -> None:
    with httpx.Client(base_url=base_url, timeout=httpx.Timeout(10.0)) as client:
        for round_ in range(MAX_ROUNDS):
            try:
                reply = deliver(client, created, writer, round_)
            except httpx.HTTPError:
                with ledger.lock:
                    ledger.unanswered.append((writer, round_))
                return
            assert reply.status_code == 202, reply.text
            with ledger.lock:
                ledger.delivered.append((writer, round_))
            try:
                increment(client, created)
            except httpx.HTTPError:
                # The kill may have landed before or after the write committed.
                with ledger.lock:
                    ledger.unanswered_increments += 1
                return
            with ledger.lock:
                ledger.increments += 1


def wait_for_load(ledger: Ledger, writers: list[threading.Thread]) -> None:
    """Return once the writers have had `KILL_AFTER_ACKNOWLEDGED` writes acknowledged.

    A busy machine only makes this take longer: the wait gives up only when no write has been
    acknowledged for `STALL_SECONDS`, or when every writer has stopped.
    """
    seen, last_progress = ledger.acknowledged, time.monotonic()
    while ledger.acknowledged < KILL_AFTER_ACKNOWLEDGED:
        assert any(thread.is_alive() for thread in writers), f"the writers stopped early: {ledger.failures}"
        if ledger.acknowledged != seen:
            seen, last_progress = ledger.acknowledged, time.monotonic()
        assert time.monotonic() - last_progress < STALL_SECONDS, f"no write acknowledged for {STALL_SECONDS:.0f} s"
        time.sleep(0.05)


def children_of(pid: int) -> list[int]:
    """Processes whose parent is `pid` (DynamoDB Local is the server's child)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name is parenthesised and may hold spaces; the parent pid follows it.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return found


def is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def all_events(client: httpx.Client, created: dict) -> list[dict]:
    events: list[dict] = []
    while True:
        params = {"after": events[-1]["sequence"] if events else 0, "limit": 1000}
        reply = client.get(path_of(created["endpoints"]["events_url"]), params=params, headers=auth(created))
        assert reply.status_code == 200, reply.text
        page = reply.json()["events"]
        if not page:
            return events
        events.extend(page)


def test_sigkill_mid_load_loses_nothing_acknowledged(tmp_path: Path):
    data_dir = tmp_path / "data"
    server = ServeProcess(tmp_path, data_dir=data_dir).start()
    try:
        with server.client() as client:
            created = client.post("/api/v1/addresses", json={}).json()
            reply = client.put(counter_url(created), json={"value": 0, "if_revision": 0}, headers=auth(created))
            assert reply.status_code == 201, reply.text
        ledger = Ledger()
        writers = [
            threading.Thread(target=write_until_the_server_dies, args=(server.base_url, created, n, ledger))
            for n in range(WRITERS)
        ]
        for thread in writers:
            thread.start()
        wait_for_load(ledger, writers)
        assert server.process is not None
        database_pids = children_of(server.process.pid)
        server.kill()
        for thread in writers:
            thread.join(timeout=30)
            assert not thread.is_alive()
    finally:
        if server.process is not None:
            server.kill()
    # DynamoDB Local follows its parent down; its files must be released before a new one opens them.
    assert database_pids, "cairn serve should have started its own DynamoDB Local"
    assert wait_until(lambda: not any(map(is_running, database_pids)), timeout=30)

    with ServeProcess(tmp_path, data_dir=data_dir) as restarted, restarted.client() as client:
        # A delivery whose answer the kill swallowed is retried with its key: it lands exactly once.
        for writer, round_ in ledger.unanswered:
            assert deliver(client, created, writer, round_).status_code in (200, 202)
        events = all_events(client, created)
        counter = client.get(counter_url(created), headers=auth(created)).json()

    assert ledger.failures == []
    assert [event["sequence"] for event in events] == list(range(1, len(events) + 1))
    jobs = Counter((event["data"]["writer"], event["data"]["round"]) for event in events if event["type"] == "job.done")
    assert all(count == 1 for count in jobs.values()), "a delivery was applied twice"
    assert set(ledger.delivered) | set(ledger.unanswered) == set(jobs)
    # Every acknowledged increment is there; one whose answer was lost may or may not be.
    assert ledger.increments <= counter["value"] <= ledger.increments + ledger.unanswered_increments
    assert counter["revision"] == counter["value"] + 1
    revisions = [event["data"]["revision"] for event in events if event["type"] == "state.updated"]
    assert revisions == list(range(1, counter["revision"] + 1))
