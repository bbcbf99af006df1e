"""The Python SDK against `cairn serve`, as an agent's code uses it."""

from __future__ import annotations

import re
import smtplib
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path

import pytest

from cairn.client import (
    Address,
    CursorFile,
    Inbox,
    InvalidRequest,
    NotFound,
    RevisionConflict,
    Unauthorized,
    UnknownRecipient,
    WrongCode,
)
from tests.support.serve import ServeProcess

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server


@pytest.fixture
def address(served: ServeProcess):
    with Address.provision(served.base_url, task_id="sdk-test", expires_in=3600) as created:
        yield created


def post_all(address: Address, *types: str) -> None:
    for kind in types:
        address.inbox.post({"type": kind, "data": {"kind": kind}}, idempotency_key=kind)


def test_a_provisioned_address_is_saved_and_restored_with_its_state(served: ServeProcess, tmp_path: Path):
    created = Address.provision(served.base_url, task_id="nightly", name="nightly build", expires_in=3600)
    assert created.id.startswith("addr_")
    assert created.expires_at is not None
    created.state.set("plan", ["fetch", "render"], if_revision=0)
    path = tmp_path / "address.json"
    created.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    with Address.restore(path) as restored:
        assert restored.state.get("plan")["value"] == ["fetch", "render"]
        assert restored.describe()["address"]["task_id"] == "nightly"
        restored.delete()
        with pytest.raises(Unauthorized):
            restored.state.keys()


def test_state_compare_and_set_and_its_typed_errors(served: ServeProcess, address: Address):
    state = address.state
    assert state.set("todo", ["a", "b"], if_revision=0)["revision"] == 1
    with pytest.raises(RevisionConflict) as conflict:
        state.set("todo", ["a"], if_revision=0)
    assert conflict.value.current_revision == 1
    assert state.set("todo", ["b"], if_revision=1)["revision"] == 2
    with pytest.raises(RevisionConflict):
        state.delete("todo", if_revision=1)
    assert state.delete("todo", if_revision=2) == {"key": "todo", "deleted": True, "revision": 3}
    with pytest.raises(NotFound):
        state.get("todo")

    batch = state.transaction(
        [{"key": "a", "op": "set", "value": 1, "if_revision": 0}, {"key": "b", "op": "set", "value": 2}]
    )
    assert [result["revision"] for result in batch["results"]] == [1, 1]
    with pytest.raises(RevisionConflict) as both:
        state.transaction([{"key": "a", "op": "set", "value": 9, "if_revision": 0}, {"key": "c", "op": "delete"}])
    assert both.value.details["conflicts"] == [{"key": "a", "current_revision": 1}]
    assert [entry["key"] for entry in state.keys()["keys"]] == ["a", "b"]

    stranger = Address.connect(served.base_url, address.id, "crt_wrong")
    with pytest.raises(Unauthorized) as refused:
        stranger.state.get("a")
    assert (refused.value.code, refused.value.status) == ("unauthorized", 401)


def test_any_key_the_server_takes_round_trips_and_no_name_reaches_another_route(address: Address):
    """The SDK encodes `:` as `%3A`; `..` would have been resolved by httpx into the address's own URL."""
    state = address.state
    assert state.set("run:1", {"step": 2})["revision"] == 1
    assert state.get("run:1")["value"] == {"step": 2}
    assert [entry["key"] for entry in state.keys()["keys"]] == ["run:1"]
    for name in ("..", ".", ""):
        for call in (state.get, state.delete, address.subscriptions.delete, address.events.ack):
            with pytest.raises(InvalidRequest):
                call(name)
    assert address.describe()["address"]["id"] == address.id, "the address is still there"
    assert state.delete("run:1")["deleted"] is True


def test_concurrent_updates_lose_nothing(address: Address, tmp_path: Path):
    """Six runs add to one counter through `update`: every increment lands, once."""
    path = tmp_path / "address.json"
    address.save(path)

    def run(_: int) -> None:
        with Address.restore(path) as mine:
            for _ in range(10):
                mine.state.update("progress", lambda p: {"count": p["count"] + 1}, default={"count": 0})

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(run, range(6)))
    final = address.state.get("progress")
    assert final["value"] == {"count": 60}
    assert final["revision"] == 60


def test_follow_acknowledges_an_event_only_after_its_block_succeeds(address: Address, tmp_path: Path):
    post_all(address, "one", "two", "three")
    cursor = tmp_path / "feed.cursor"

    handled = []
    with pytest.raises(RuntimeError):
        for event in address.events.follow(cursor_file=cursor, wait=0):
            if event["type"] == "two":
                raise RuntimeError("the handler failed")
            handled.append(event["type"])
    assert handled == ["one"]
    assert CursorFile(cursor).read() == 1
    events = address.events.poll()["events"]
    assert [(e["acknowledged_at"] is not None, e["ingress_surface"]) for e in events] == [
        (True, "http"),
        (False, "http"),
        (False, "http"),
    ]

    # A later follower (a new process would do the same) resumes at the failed event.
    follower = address.events.follow(cursor_file=cursor, wait=0)
    for event in follower:
        handled.append(event["type"])
        if event["type"] == "three":
            follower.stop()
    assert handled == ["one", "two", "three"]
    assert CursorFile(cursor).read() == 3
    assert all(e["acknowledged_at"] for e in address.events.poll()["events"])


def test_breaking_out_of_follow_leaves_the_event_for_next_time(address: Address, tmp_path: Path):
    post_all(address, "only")
    cursor = tmp_path / "feed.cursor"
    for event in address.events.follow(cursor_file=cursor, wait=0):  # noqa: B007 (read after the loop)
        break
    assert CursorFile(cursor).read() == 0
    assert address.events.poll()["events"][0]["acknowledged_at"] is None
    assert event["type"] == "only"


def test_follow_long_polls_for_an_event_that_arrives_later(address: Address):
    received: dict = {}

    def agent() -> None:
        begun = time.monotonic()
        follower = address.events.follow(wait=20)
        event = next(follower)
        received.update(type=event["type"], elapsed=time.monotonic() - begun)
        follower.stop()

    thread = threading.Thread(target=agent)
    thread.start()
    time.sleep(0.5)
    Inbox(address.inbox_url).post({"type": "late.callback"})
    thread.join(30)
    assert received["type"] == "late.callback"
    # Before its own 20 s timeout: it woke on the commit.
    assert received["elapsed"] < 20, "the follower waited for its timeout instead of waking"


def test_inbox_posts_are_idempotent_by_key(address: Address):
    with Inbox(address.inbox_url) as inbox:
        first = inbox.post({"type": "build.done"}, idempotency_key="build-1")
        again = inbox.post({"type": "build.done"}, idempotency_key="build-1")
        other = inbox.post({"type": "build.done"})
        another = inbox.post({"type": "build.done"})
    assert (first["duplicate"], again["duplicate"]) == (False, True)
    assert again["event"] == first["event"]
    assert len({first["event"]["id"], other["event"]["id"], another["event"]["id"]}) == 3


def test_an_email_attachment_downloads_to_an_owner_only_file(served: ServeProcess, address: Address, tmp_path: Path):
    report = b"%PDF-1.4\n" + bytes(range(256)) * 8
    message = EmailMessage()
    message["From"] = "ops@example.com"
    message["To"] = address.email
    message["Subject"] = "Report"
    message.set_content("Attached.")
    message.add_attachment(report, maintype="application", subtype="pdf", filename="report.pdf")
    with smtplib.SMTP("127.0.0.1", served.smtp_port, timeout=10) as smtp:
        smtp.send_message(message)

    [event] = address.events.poll(wait=10)["events"]
    [attachment] = event["data"]["attachments"]
    saved = address.attachments.download(event, attachment["id"], tmp_path / "report.pdf")
    assert saved == {"path": str(tmp_path / "report.pdf"), "size": len(report), "content_type": "application/pdf"}
    assert (tmp_path / "report.pdf").read_bytes() == report
    assert stat.S_IMODE((tmp_path / "report.pdf").stat().st_mode) == 0o600


def test_the_runtime_store_client_is_part_of_the_sdk(served: ServeProcess):
    from cairn.runtime import HttpRuntimeStore

    store = HttpRuntimeStore(served.base_url, runtime_key=served.runtime_key)
    assert store.create_session("sdk-session", datetime(2026, 1, 1, tzinfo=UTC)).id == "sdk-session"


def _outbox_code(served: ServeProcess) -> str:
    """The newest code `cairn serve` mailed into its outbox (no relay configured)."""
    newest = max((served.data_dir / "outbox").glob("*.eml"), key=lambda path: path.stat().st_mtime_ns)
    return re.search(rb"code is: (\d{6})", newest.read_bytes()).group(1).decode()


def test_mail_from_the_address_to_a_verified_contact(served: ServeProcess, address: Address):
    assert str(address.email).endswith("@cairn.localhost")
    assert address.email.contacts() == {"contacts": [], "outbound_configured": True}
    asked = address.email.add_contact("ada@example.org")
    assert (asked["status"], asked["code_sent"]) == ("pending", True)
    with pytest.raises(WrongCode) as wrong:
        address.email.verify_contact("ada@example.org", "12345x")
    assert wrong.value.status == 400 and wrong.value.details["attempts_left"] == 4
    verified = address.email.verify_contact("ada@example.org", _outbox_code(served))
    assert verified["status"] == "verified"
    with pytest.raises(UnknownRecipient):
        address.email.send("bob@example.org", "Hello.", subject="Hi", idempotency_key="m0")
    sent = address.email.send("ada@example.org", "Hello.", subject="Hi", idempotency_key="m1")
    again = address.email.send("ada@example.org", "Hello.", subject="Hi", idempotency_key="m1")
    assert (sent["status"], sent["duplicate"], again["duplicate"]) == ("accepted", False, True)
    assert again["message_id"] == sent["message_id"]
    types = [event["type"] for event in address.events.poll()["events"]]
    assert types == ["email.sent", "email.delivered"]
    address.email.remove_contact("ada@example.org")
    assert address.email.contacts()["contacts"] == []
