"""Agent-session routes and `CairnSession` through the Lambda resolver, on moto: answers, paging, limits, refusals."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from botocore.exceptions import EndpointConnectionError

from cairn.agent_sessions import conversations
from cairn.client import Address, HttpClient, RetryPolicy
from cairn.dynamodb import keys
from cairn.dynamodb.agent_session_items import POP_CLAIM_SECONDS, ROW_OVERHEAD, item_bytes
from cairn.dynamodb.agent_session_table import STAGE_LEASE
from cairn.errors import SessionConflict, StorageLimitExceeded
from cairn.files.ports import stored_bytes
from cairn.integrations.openai_agents import CairnSession
from cairn.integrations.openai_agents import session as openai_agents_session
from cairn.jsontext import canonical, sent_size
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, Reply
from tests.support.storage_usage import counted


@pytest.fixture
def api(moto_env: None, clock: FakeClock) -> LambdaClient:
    return LambdaClient.on_moto(clock)


@pytest.fixture
def address(api: LambdaClient) -> Address:
    return Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))


def url(address: Address, session_id: str = "s") -> str:
    return f"/api/v1/addresses/{address.id}/sessions/{session_id}/items"


def call(api: LambdaClient, address: Address, method: str, path: str = "", **parts: Any) -> Reply:
    return api.request(method, url(address) + path, token=address.read_token, **parts)


def said(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"m{index}"} for index in range(n)]


def turn(calls: int) -> list[dict[str, Any]]:
    """A turn of `calls` tool calls, as the OpenAI Agents SDK adds it: each call, then its output."""
    return [
        each
        for index in range(calls)
        for each in (
            {"type": "function_call", "call_id": f"c{index}", "name": "step", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{index}", "output": str(index)},
        )
    ]


def test_each_route_answers_its_documented_shape(api: LambdaClient, address: Address):
    added = call(api, address, "POST", json_body={"items": said(3)})
    assert (added.status, added.json()) == (201, {"session_id": "s", "added": 3, "count": 3})
    assert call(api, address, "POST", json_body={"items": said(1)}).json()["count"] == 4

    page = call(api, address, "GET", "?limit=2")
    assert page.status == 200
    assert page.json() == {"session_id": "s", "items": [said(3)[2], said(1)[0]], "next": 3, "version": 2}
    older = call(api, address, "GET", "?limit=5&before=3").json()
    assert older == {"session_id": "s", "items": said(2), "next": None, "version": 2}
    # No item at all: only the version, what a replacement may name.
    assert call(api, address, "GET", "?limit=0").json() == {"session_id": "s", "items": [], "next": None, "version": 2}

    popped = call(api, address, "POST", "/pop")
    assert (popped.status, popped.json()) == (200, {"session_id": "s", "item": said(1)[0]})
    cleared = call(api, address, "DELETE")
    assert (cleared.status, cleared.json()) == (200, {"session_id": "s", "cleared": True})
    assert call(api, address, "GET").json()["items"] == []
    assert call(api, address, "POST", "/pop").json()["item"] is None


def test_an_unknown_session_is_empty_and_clearing_it_is_no_error(api: LambdaClient, address: Address):
    assert call(api, address, "GET").json() == {"session_id": "s", "items": [], "next": None, "version": 0}
    assert call(api, address, "POST", "/pop").json()["item"] is None
    assert call(api, address, "DELETE").status == 200


def test_items_added_after_a_clear_are_the_only_ones(api: LambdaClient, address: Address):
    call(api, address, "POST", json_body={"items": said(3)})
    call(api, address, "DELETE")
    call(api, address, "POST", json_body={"items": [{"role": "user", "content": "after"}]})

    assert call(api, address, "GET").json()["items"] == [{"role": "user", "content": "after"}]
    assert call(api, address, "POST", "/pop").json()["item"] == {"role": "user", "content": "after"}
    assert call(api, address, "POST", "/pop").json()["item"] is None


def test_a_session_larger_than_one_answer_is_read_a_page_at_a_time_and_whole(api: LambdaClient, address: Address):
    large = [{"role": "tool", "content": str(index) * 1_500_000} for index in range(5)]
    for start in range(0, 5, 2):
        assert call(api, address, "POST", json_body={"items": large[start : start + 2]}).status == 201

    first = call(api, address, "GET").json()

    assert 1 <= len(first["items"]) < 5 and first["next"] is not None
    assert first["items"] == large[5 - len(first["items"]) :]
    assert asyncio.run(CairnSession(address, "s").get_items()) == large
    assert asyncio.run(CairnSession(address, "s").get_items(limit=4)) == large[1:]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"items": said(conversations.MAX_ITEMS_PER_ADD + 1)}, 422, "invalid_request"),
        ({"items": [{"t": "x" * 1_800_000}, {"t": "y" * 1_800_000}]}, 413, "payload_too_large"),
        ({"items": [{"t": "\u00e9" * 1_000_000}]}, 413, "payload_too_large"),
        ({"items": []}, 422, "invalid_request"),
    ],
    ids=["too-many", "too-many-bytes", "too-large-to-answer", "empty"],
)
def test_an_add_over_a_limit_is_refused_whole(api: LambdaClient, address: Address, body: dict, status: int, code: str):
    call(api, address, "POST", json_body={"items": said(2)})

    reply = call(api, address, "POST", json_body=body)

    assert (reply.status, reply.error_code) == (status, code)
    assert call(api, address, "GET").json()["items"] == said(2)


def test_a_session_id_outside_the_alphabet_is_refused(api: LambdaClient, address: Address):
    for session_id in ("x" * 257, "a%20b", "caf%C3%A9"):
        reply = api.request("GET", url(address, session_id), token=address.read_token)
        assert (reply.status, reply.error_code) == (400, "invalid_request"), session_id


def test_deleting_the_address_deletes_its_sessions(api: LambdaClient, address: Address):
    call(api, address, "POST", json_body={"items": [{"content": "x" * 900_000}, *said(2)]})

    assert api.request("DELETE", f"/api/v1/addresses/{address.id}", token=address.read_token).status == 200

    assert call(api, address, "GET").status == 401
    client = api.services.client
    left = client.query(
        TableName=api.services.settings.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"A#{address.id}"}},
    )["Items"]
    assert left == []


def test_an_add_sent_again_under_its_add_id_adds_nothing(api: LambdaClient, address: Address):
    body = {"items": said(2), "add_id": "retry-1"}

    answers = [call(api, address, "POST", json_body=body) for _ in range(2)]
    other = call(api, address, "POST", json_body={"items": said(1), "add_id": "retry-2"})

    assert [answer.json()["count"] for answer in answers] == [2, 2]
    assert other.json()["count"] == 3
    assert call(api, address, "GET").json()["items"] == [*said(2), *said(1)]


def test_an_add_id_sent_again_with_other_items_is_refused_and_adds_nothing(api: LambdaClient, address: Address):
    """Only a retry of the same items adds nothing quietly: other items under a used id would be lost."""
    assert call(api, address, "POST", json_body={"items": said(1), "add_id": "a1"}).status == 201

    other = call(api, address, "POST", json_body={"items": said(2), "add_id": "a1"})

    assert (other.status, other.error_code) == (422, "idempotency_key_reused")
    assert call(api, address, "GET").json()["items"] == said(1)


def test_a_pop_sent_again_under_its_pop_id_answers_the_same_item_and_takes_no_other(
    api: LambdaClient, address: Address
):
    large = {"role": "tool", "content": "x" * 1_500_000}  # kept in pieces, in the item and in the claim
    call(api, address, "POST", json_body={"items": [*said(2), large]})

    first = call(api, address, "POST", "/pop?pop_id=p1").json()["item"]
    again = call(api, address, "POST", "/pop?pop_id=p1").json()["item"]
    assert first == again == large
    assert call(api, address, "GET").json()["items"] == said(2)

    assert call(api, address, "POST", "/pop?pop_id=p2").json()["item"] == said(2)[1]
    assert call(api, address, "POST", "/pop?pop_id=p3").json()["item"] == said(2)[0]
    # The session is empty now; a retry of the pop that emptied it still answers what it took.
    assert call(api, address, "POST", "/pop?pop_id=p3").json()["item"] == said(2)[0]
    assert call(api, address, "POST", "/pop?pop_id=p4").json()["item"] is None


def test_a_retried_pop_id_answers_nothing_to_another_token(api: LambdaClient, address: Address):
    call(api, address, "POST", json_body={"items": said(1)})
    assert call(api, address, "POST", "/pop?pop_id=p1").json()["item"] == said(1)[0]

    stolen = api.request("POST", url(address) + "/pop?pop_id=p1", token="not-the-token")
    assert (stolen.status, stolen.json()["error"]["code"]) == (401, "unauthorized")


@pytest.mark.parametrize("pop_id", ["", "a" * 65, "has.dot", "co:lon"])
def test_a_malformed_pop_id_is_refused_and_pops_nothing(api: LambdaClient, address: Address, pop_id: str):
    call(api, address, "POST", json_body={"items": said(1)})
    reply = call(api, address, "POST", f"/pop?pop_id={pop_id}")
    assert (reply.status, reply.json()["error"]["code"]) == (422, "invalid_request")
    assert call(api, address, "GET").json()["items"] == said(1)


def test_cairn_session_pop_item_survives_a_lost_answer(api: LambdaClient, address: Address):
    """The first answer to the pop is lost on the way back (the gateway answers 502); the SDK's retry
    answers the item the pop took, and no second item is taken."""
    call(api, address, "POST", json_body={"items": said(3)})
    lost: list[str] = []

    def losing_first_pop(request: httpx.Request) -> httpx.Response:
        answer = api.handle(request)
        if request.url.path.endswith("/pop") and not lost:
            lost.append(request.url.params.get("pop_id", ""))
            return httpx.Response(502, json={"message": "Internal server error"})
        return answer

    base_url = address.address_url.split("/api/v1/", 1)[0]
    http = HttpClient(transport=httpx.MockTransport(losing_first_pop), retry=RetryPolicy(base_delay=0.0))
    session = CairnSession(Address.connect(base_url, address.id, address.read_token, http=http), "s")

    assert asyncio.run(session.pop_item()) == said(3)[2]
    assert len(lost) == 1
    assert asyncio.run(session.get_items()) == said(2)


LATE = {"role": "user", "content": "late"}
# Each write of the session, and the history it leaves behind a history of two messages.
WRITES: dict[str, tuple[Callable[[CairnSession], Awaitable[Any]], list[dict[str, Any]]]] = {
    "add_items": (lambda session: session.add_items([LATE]), [*said(2), LATE]),
    "pop_item": (lambda session: session.pop_item(), said(1)),
    "clear_session": (lambda session: session.clear_session(), []),
    "_atomic_replace_items": (lambda session: session._atomic_replace_items([LATE]), [LATE]),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_a_cancelled_caller_sees_its_cancellation_once_the_write_has_settled(
    api: LambdaClient, address: Address, write: str
):
    """The SDK's rule for a session's writes (`await_session_mutation`): a run cancelled during one settles
    its checkpoint by reading what is stored, so the cancellation must reach it after the write, not while
    the write is still on its way to land later."""
    call(api, address, "POST", json_body={"items": said(2)})
    sent, release, answered = threading.Event(), threading.Event(), []

    def holding_writes(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return api.handle(request)
        sent.set()
        release.wait(30)
        answer = api.handle(request)
        answered.append(answer.status_code)
        return answer

    base_url = address.address_url.split("/api/v1/", 1)[0]
    http = HttpClient(transport=httpx.MockTransport(holding_writes))
    session = CairnSession(Address.connect(base_url, address.id, address.read_token, http=http), "s")
    start, history = WRITES[write]

    async def cancelled_midway() -> list[int]:
        running = asyncio.ensure_future(start(session))
        await asyncio.to_thread(sent.wait, 30)
        running.cancel()
        threading.Timer(0.2, release.set).start()
        with pytest.raises(asyncio.CancelledError):
            await running
        return list(answered)

    assert len(asyncio.run(cancelled_midway())) == 1
    assert stored(api, address) == history


def test_cairn_session_adds_more_than_one_request_holds_at_once_and_a_lost_answer_adds_nothing_twice(
    api: LambdaClient, address: Address
):
    """The SDK hands a session a conversation of any length (a run's whole input, many tool calls, large tool
    outputs): more items or bytes than one request holds go in parts, in order, and no reader sees any of them
    until the last part commits them all; the second part's first answer is lost here, and its retry adds
    nothing twice."""
    call(api, address, "POST", json_body={"items": said(2)})
    before = stored(api, address)
    large = [{"role": "tool", "content": str(index) * 1_500_000} for index in range(3)]
    items = [*said(1010), *large, {"role": "user", "content": "last"}]
    parts: list[int] = []
    seen_after_each: list[list[dict[str, Any]]] = []

    def losing_the_second_part(request: httpx.Request) -> httpx.Response:
        answer = api.handle(request)
        if request.method == "POST" and request.url.path.endswith("/items"):
            parts.append(len(json.loads(request.content)["items"]))
            seen_after_each.append(stored(api, address))
            if len(parts) == 2:
                return httpx.Response(502, json={"message": "Internal server error"})
        return answer

    base_url = address.address_url.split("/api/v1/", 1)[0]
    http = HttpClient(transport=httpx.MockTransport(losing_the_second_part), retry=RetryPolicy(base_delay=0.0))
    session = CairnSession(Address.connect(base_url, address.id, address.read_token, http=http), "s")

    asyncio.run(session.add_items(items))

    # 1,000 (as many as one request holds), 10 and two large items (3 MB; its answer lost, then sent again), the
    # third and the last.
    assert parts == [1000, 12, 12, 2]
    assert seen_after_each == [before, before, before, [*before, *items]]
    assert stored(api, address) == [*before, *items]


def test_sessions_and_files_share_the_address_storage_limit_and_an_add_past_it_changes_nothing(
    moto_env: None, clock: FakeClock
):
    item = {"role": "user", "content": "x" * 3000}
    cost = item_bytes(sent_size(canonical(item)))
    head = len(b"s") + ROW_OVERHEAD
    file_cost = stored_bytes("f", 1000)
    limit = head + 3 * cost + file_cost + 99
    api = LambdaClient.on_moto(clock, storage_max_bytes=limit)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    assert call(api, address, "POST", json_body={"items": [item, item]}).json()["count"] == 2
    files_url = f"/api/v1/addresses/{address.id}/files"
    data = base64.b64encode(b"x" * 1000).decode()
    written = api.request("POST", files_url, token=address.read_token, json_body={"key": "f", "data": data})
    assert written.status == 201, written.text

    refused = call(api, address, "POST", json_body={"items": [item, item]})
    assert (refused.status, refused.error_code) == (413, "storage_limit_exceeded"), refused.text
    assert {name: refused.json()["error"][name] for name in ("max_bytes", "used_bytes", "needed_bytes")} == {
        "max_bytes": limit,
        "used_bytes": head + 2 * cost + file_cost,
        "needed_bytes": 2 * cost,
    }
    assert call(api, address, "GET").json()["items"] == [item, item]
    # One more fits exactly, to the byte: 99 bytes of room are left, fewer than an item's.
    assert call(api, address, "POST", json_body={"items": [item]}).json()["count"] == 3
    one_byte_more = {"role": "user", "content": "x" * 100}
    assert call(api, address, "POST", json_body={"items": [one_byte_more]}).error_code == "storage_limit_exceeded"
    assert usage(api, address) == limit - 99

    # The SDK's session meets the same refusal as the error it is.
    with pytest.raises(StorageLimitExceeded):
        asyncio.run(CairnSession(address, "s").add_items([item]))


def test_a_pop_gives_its_room_back_at_once_and_a_pop_under_a_pop_id_a_day_later(moto_env: None, clock: FakeClock):
    item = {"role": "user", "content": "x" * 3000}
    cost = item_bytes(sent_size(canonical(item)))
    head = len(b"s") + ROW_OVERHEAD
    api = LambdaClient.on_moto(clock, storage_max_bytes=head + 2 * cost)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    call(api, address, "POST", json_body={"items": [item, item]})
    assert usage(api, address) == head + 2 * cost

    assert call(api, address, "POST", "/pop").json()["item"] == item
    assert usage(api, address) == head + cost
    # Its claim keeps the item a day, for the pop's retries: the room comes back once that is over.
    assert call(api, address, "POST", "/pop?pop_id=p1").json()["item"] == item
    assert usage(api, address) == head + cost
    assert call(api, address, "POST", json_body={"items": [item]}).status == 201
    assert call(api, address, "POST", json_body={"items": [item]}).error_code == "storage_limit_exceeded"
    clock.advance(POP_CLAIM_SECONDS)
    assert call(api, address, "POST", json_body={"items": [item]}).json()["count"] == 2
    assert usage(api, address) == head + 2 * cost

    assert call(api, address, "DELETE").json()["cleared"]
    assert usage(api, address) == head
    # A retried add (its claim stays with the address) counts its claim once, and its items once.
    for _ in range(2):
        assert call(api, address, "POST", json_body={"items": [item], "add_id": "a1"}).json()["count"] == 1
    assert usage(api, address) == head + cost + ROW_OVERHEAD


def usage(api: LambdaClient, address: Address) -> int:
    return counted(api.services.settings, address.id)


# -- replacing items (the SDK's compaction) ------------------------------------------------


def replace(api: LambdaClient, address: Address, **body: Any) -> Reply:
    return call(api, address, "POST", "/replace", json_body=body)


def stored(api: LambdaClient, address: Address) -> list[dict[str, Any]]:
    return asyncio.run(CairnSession(address, "s").get_items())


def test_replacing_every_item_leaves_only_the_new_ones_and_moves_the_version(api: LambdaClient, address: Address):
    call(api, address, "POST", json_body={"items": said(5)})
    summary = [{"type": "compaction", "encrypted_content": "abc"}]

    replaced = replace(api, address, items=summary, version=1)

    assert (replaced.status, replaced.json()) == (200, {"session_id": "s", "count": 1, "version": 2})
    assert stored(api, address) == summary
    assert call(api, address, "GET").json()["version"] == 2
    # The session goes on after the replacement: a later add follows it, a pop takes the newest.
    call(api, address, "POST", json_body={"items": said(1)})
    assert stored(api, address) == [*summary, *said(1)]
    assert call(api, address, "POST", "/pop").json()["item"] == said(1)[0]
    assert stored(api, address) == summary


def test_replacing_the_newest_items_keeps_the_older_ones_in_order(api: LambdaClient, address: Address):
    call(api, address, "POST", json_body={"items": said(6)})
    summary = [{"type": "compaction", "encrypted_content": "tail"}]

    replaced = replace(api, address, items=summary, newest=2, version=1)

    assert replaced.json()["count"] == 5
    assert stored(api, address) == [*said(4), *summary]
    # Paging back over what stayed and what came in still reads everything once.
    assert asyncio.run(CairnSession(address, "s").get_items(limit=2)) == [said(4)[3], *summary]


def test_a_replacement_of_every_item_holds_as_many_as_a_read_answers(api: LambdaClient, address: Address):
    """OpenAI's compaction summary keeps every user message: replacing the whole history takes up to a page."""
    call(api, address, "POST", json_body={"items": said(3)})
    summary = [*said(conversations.MAX_ITEMS_PER_REPLACE - 1), {"type": "compaction"}]

    replaced = replace(api, address, items=summary, replace_id="all")

    assert replaced.json()["count"] == conversations.MAX_ITEMS_PER_REPLACE
    assert stored(api, address) == summary


def test_a_replacement_with_no_items_removes_the_replaced_ones(api: LambdaClient, address: Address):
    call(api, address, "POST", json_body={"items": said(3)})

    assert replace(api, address, items=[], newest=1).json()["count"] == 2
    assert stored(api, address) == said(2)
    assert replace(api, address, items=[]).json()["count"] == 0
    assert stored(api, address) == []


def test_a_replacement_of_a_version_no_longer_there_changes_nothing(api: LambdaClient, address: Address):
    call(api, address, "POST", json_body={"items": said(3)})
    read = call(api, address, "GET").json()["version"]
    call(api, address, "POST", json_body={"items": [{"role": "user", "content": "meanwhile"}]})

    refused = replace(api, address, items=[{"type": "compaction"}], version=read)

    assert (refused.status, refused.error_code) == (409, "session_conflict")
    assert refused.json()["error"]["current_version"] == read + 1
    assert stored(api, address) == [*said(3), {"role": "user", "content": "meanwhile"}]


def test_a_replacement_sent_again_under_its_replace_id_changes_nothing_more(api: LambdaClient, address: Address):
    call(api, address, "POST", json_body={"items": said(4)})
    body = {"items": [{"type": "compaction"}], "newest": 2, "version": 1, "replace_id": "compact-1"}

    first, again = replace(api, address, **body), replace(api, address, **body)

    assert first.json() == again.json() == {"session_id": "s", "count": 3, "version": 2}
    assert stored(api, address) == [*said(2), {"type": "compaction"}]
    # The same id with another replacement is refused, not taken for the first.
    other = replace(api, address, **{**body, "items": [{"type": "other"}]})
    assert (other.status, other.error_code) == (422, "idempotency_key_reused")
    assert stored(api, address) == [*said(2), {"type": "compaction"}]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"items": said(conversations.MAX_ITEMS_PER_REPLACE + 1)}, 422, "invalid_request"),
        ({"items": [{"t": "x" * 1_800_000}, {"t": "y" * 1_800_000}]}, 413, "payload_too_large"),
        ({"items": said(1), "newest": 0}, 422, "invalid_request"),
        ({"items": said(1), "version": -1}, 422, "invalid_request"),
        ({"items": said(1), "replace_id": "has.dot"}, 422, "invalid_request"),
        ({"items": said(1), "extra": True}, 422, "invalid_request"),
        # Keeping the oldest items, the new ones go in one commit: 98, with the head, the address check and the
        # count, are more than it takes.
        ({"items": said(98), "newest": 1}, 400, "invalid_request"),
    ],
    ids=[
        "too-many",
        "too-many-bytes",
        "newest-zero",
        "negative-version",
        "bad-id",
        "unknown-field",
        "too-many-kept",
    ],
)
def test_a_replacement_over_a_limit_is_refused_and_changes_nothing(
    api: LambdaClient, address: Address, body: dict, status: int, code: str
):
    for start in range(0, 100, 50):
        call(api, address, "POST", json_body={"items": said(100)[start : start + 50]})

    reply = replace(api, address, **body)

    assert (reply.status, reply.error_code) == (status, code), reply.text
    assert stored(api, address) == said(100)


def test_replacing_every_item_of_a_long_session_is_one_commit_whatever_its_length(api: LambdaClient, address: Address):
    # More items than one transaction could delete (about 97).
    for start in range(0, 200, 50):
        call(api, address, "POST", json_body={"items": said(200)[start : start + 50]})

    assert replace(api, address, items=said(1), newest=200).json()["count"] == 1
    assert stored(api, address) == said(1)
    # The replaced items are deleted, not only hidden.
    rows = api.services.client.query(
        TableName=api.services.settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :sessions)",
        ExpressionAttributeValues={":pk": {"S": f"A#{address.id}"}, ":sessions": {"S": "AGS#"}},
    )["Items"]
    assert len(rows) == 2  # the head and the one item


def test_a_replacement_counts_what_it_stores_and_gives_back_what_it_removes(moto_env: None, clock: FakeClock):
    item = {"role": "user", "content": "x" * 3000}
    small = {"type": "compaction", "encrypted_content": "y" * 100}
    cost, small_cost = (item_bytes(sent_size(canonical(each))) for each in (item, small))
    head = len(b"s") + ROW_OVERHEAD
    api = LambdaClient.on_moto(clock, storage_max_bytes=head + 3 * cost)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    call(api, address, "POST", json_body={"items": [item, item, item]})

    # A replacement growing the session past the limit is refused whole.
    refused = replace(api, address, items=[item, item], newest=1)
    assert (refused.status, refused.error_code) == (413, "storage_limit_exceeded")
    assert usage(api, address) == head + 3 * cost

    assert replace(api, address, items=[small], newest=2).json()["count"] == 2
    assert usage(api, address) == head + cost + small_cost
    assert replace(api, address, items=[small], replace_id="r1").json()["count"] == 1
    assert usage(api, address) == head + small_cost + ROW_OVERHEAD


def test_a_replacement_needs_the_addresss_token(api: LambdaClient, address: Address):
    call(api, address, "POST", json_body={"items": said(2)})

    reply = api.request("POST", url(address) + "/replace", token="rt_wrong", json_body={"items": []})

    assert (reply.status, reply.error_code) == (401, "unauthorized")
    assert stored(api, address) == said(2)


# -- replacements of every item larger than one commit (staged) ---------------------------


def session_rows(api: LambdaClient, address: Address) -> list[str]:
    """The sort keys of every row the address's sessions hold: heads, items, their pieces and claims."""
    rows = api.services.client.query(
        TableName=api.services.settings.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"A#{address.id}"}},
        ProjectionExpression="sk",
    )["Items"]
    return [row["sk"]["S"] for row in rows if "AGS#" in row["sk"]["S"]]


def history(api: LambdaClient, address: Address, count: int) -> list[dict[str, Any]]:
    """A session of `count` user messages, added 50 at a time."""
    items = said(count)
    for start in range(0, count, 50):
        call(api, address, "POST", json_body={"items": items[start : start + 50]})
    return items


def compaction_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What OpenAI's compaction answers for a history: every user message, then its summary."""
    return [*items, {"type": "compaction", "encrypted_content": f"{len(items)} items"}]


def fail_transactions(api: LambdaClient, numbers: set[int]) -> None:
    """Fail the API client's `TransactWriteItems` calls of these numbers (from 1), as an unreachable DynamoDB
    would."""
    calls = 0

    def before(model: Any, **_: Any) -> None:
        nonlocal calls
        if model.name == "TransactWriteItems":
            calls += 1
            if calls in numbers:
                raise EndpointConnectionError(endpoint_url="http://dynamodb.invalid")

    api.services.client.meta.events.register("before-call.dynamodb", before)


def test_a_compaction_keeping_more_items_than_one_commit_holds_replaces_every_item(moto_env: None, clock: FakeClock):
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    history(api, address, 150)
    summary = compaction_of(said(120))
    version = call(api, address, "GET").json()["version"]

    body = {"items": summary, "version": version, "replace_id": "compact-big"}
    first, again = replace(api, address, **body), replace(api, address, **body)

    assert first.status == 200, first.text
    assert first.json() == again.json()
    assert first.json()["count"] == 121
    assert stored(api, address) == summary
    # Nothing of the old history or of the writing is left: the head, the new items and the claim.
    assert len(session_rows(api, address)) == 1 + 121 + 1
    cost = sum(item_bytes(sent_size(canonical(each))) for each in summary)
    assert usage(api, address) == len(b"s") + ROW_OVERHEAD + cost + ROW_OVERHEAD
    # The session goes on after it.
    call(api, address, "POST", json_body={"items": said(1)})
    assert call(api, address, "POST", "/pop").json()["item"] == said(1)[0]
    assert stored(api, address) == summary


@pytest.mark.parametrize("change", ["replacement", "add"])
def test_a_large_change_that_fails_midway_leaves_the_session_as_it_was(moto_env: None, clock: FakeClock, change: str):
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    old = history(api, address, 100)
    rows, counted_before = session_rows(api, address), usage(api, address)
    version = call(api, address, "GET").json()["version"]
    if change == "replacement":
        made = compaction_of(said(120))
        send = functools.partial(replace, api, address, items=made, version=version)
    else:
        made = [*old, *turn(150)]
        send = functools.partial(call, api, address, "POST", json_body={"items": turn(150), "add_id": "long"})
    # The opening and the first rows commit; the second part fails, and the writer lets go of what it wrote.
    fail_transactions(api, {3})

    reply = send()

    assert reply.status == 503, reply.text
    assert stored(api, address) == old
    assert session_rows(api, address) == rows
    assert usage(api, address) == counted_before
    # Nothing a reader sees changed, nor the version: sent again (under it), it is made whole.
    assert call(api, address, "GET").json()["version"] == version
    assert send().json()["count"] == len(made)
    assert stored(api, address) == made


def test_a_large_replacement_its_writer_left_is_passed_by_and_goes_once_it_lapses(moto_env: None, clock: FakeClock):
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    old = history(api, address, 120)
    rows, counted_before = session_rows(api, address), usage(api, address)
    # The writer stops after its first rows: even the letting go fails, as when its process ends.
    fail_transactions(api, {3, 4})
    assert replace(api, address, items=compaction_of(said(200))).status == 503
    assert len(session_rows(api, address)) > len(rows)  # its first rows are stored, above the items

    # Reads, pages and pops pass its rows by; adds go on below them.
    assert stored(api, address) == old
    assert asyncio.run(CairnSession(address, "s").get_items(limit=3)) == old[-3:]
    page = call(api, address, "GET", f"?limit=2&before={10**9}").json()
    assert page["items"] == old[-2:]
    late = {"role": "user", "content": "late"}
    call(api, address, "POST", json_body={"items": [late]})
    assert call(api, address, "POST", "/pop").json()["item"] == late
    # Another large replacement waits for it to lapse.
    held = replace(api, address, items=compaction_of(said(100)))
    assert (held.status, held.error_code, held.json()["error"]["reason"]) == (409, "session_conflict", "held")
    assert stored(api, address) == old

    # Once it lapses, the next change lets it go: its rows deleted, its bytes no longer counted.
    clock.advance(STAGE_LEASE)
    call(api, address, "POST", json_body={"items": [late]})
    assert stored(api, address) == [*old, late]
    assert len(session_rows(api, address)) == len(rows) + 1
    assert usage(api, address) == counted_before + item_bytes(sent_size(canonical(late)))
    assert replace(api, address, items=compaction_of(said(100))).json()["count"] == 101
    assert stored(api, address) == compaction_of(said(100))


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "unversioned"])
def test_an_add_made_while_a_large_replacement_writes(moto_env: None, clock: FakeClock, versioned: bool):
    """With the version it read, the replacement yields to the add and leaves nothing; without, it replaces
    the add too, as a replacement of every item in one commit made after the add would."""
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    old = history(api, address, 100)
    rows = session_rows(api, address)
    version = call(api, address, "GET").json()["version"]
    late = {"role": "user", "content": "added meanwhile"}
    transactions = 0

    def add_once_written(model: Any, **_: Any) -> None:
        nonlocal transactions
        if model.name == "TransactWriteItems":
            transactions += 1
            if transactions == 3:  # after the opening and the first rows: another writer's add
                assert call(api, address, "POST", json_body={"items": [late]}).status == 201

    api.services.client.meta.events.register("before-call.dynamodb", add_once_written)
    summary = compaction_of(said(120))

    reply = replace(api, address, items=summary, **({"version": version} if versioned else {}))

    if versioned:
        assert (reply.status, reply.error_code) == (409, "session_conflict")
        assert reply.json()["error"]["current_version"] == call(api, address, "GET").json()["version"]
        assert stored(api, address) == [*old, late]
        assert len(session_rows(api, address)) == len(rows) + 1
    else:
        assert reply.json()["count"] == 121
        assert stored(api, address) == summary


def test_a_large_replacement_of_a_session_not_yet_written_counts_its_head_and_items(moto_env: None, clock: FakeClock):
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    summary = compaction_of(said(130))

    reply = api.request(
        "POST", url(address, "new") + "/replace", token=address.read_token, json_body={"items": summary}
    )

    assert (reply.status, reply.json()["count"], reply.json()["version"]) == (200, 131, 1)
    assert asyncio.run(CairnSession(address, "new").get_items()) == summary
    cost = sum(item_bytes(sent_size(canonical(each))) for each in summary)
    assert usage(api, address) == len(b"new") + ROW_OVERHEAD + cost


def test_a_read_the_last_commit_of_a_large_replacement_overtakes_is_read_again(moto_env: None, clock: FakeClock):
    """A read meets the head while the replacement is written, then queries the items below its rows: when the
    replacement commits and deletes the old items in between, the read answers the replacement, not what was
    left of the history."""
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    history(api, address, 120)
    summary = compaction_of(said(150))
    at_last_commit, go = threading.Event(), threading.Event()
    calls: Counter[tuple[str, str]] = Counter()

    def interleave(model: Any, **_: Any) -> None:
        actor = "writer" if threading.current_thread() is writer else "reader"
        calls[actor, model.name] += 1
        if actor == "writer" and model.name == "TransactWriteItems" and calls[actor, model.name] == 4:
            at_last_commit.set()  # the opening and two parts are written; the last commit waits
            go.wait(timeout=30)
        if actor == "reader" and model.name == "Query" and calls[actor, model.name] == 2:
            go.set()  # the reader has the head; its query below the stage waits for the writer to end
            writer.join(timeout=30)

    writer = threading.Thread(target=replace, args=(api, address), kwargs={"items": summary})
    api.services.client.meta.events.register("before-call.dynamodb", interleave)
    writer.start()
    assert at_last_commit.wait(timeout=30)

    read = call(api, address, "GET").json()

    assert not writer.is_alive()
    assert read["items"] == summary
    assert read["version"] == call(api, address, "GET").json()["version"]


# -- adds too large for one commit -------------------------------------------------------------


def cost(items: list[dict[str, Any]]) -> int:
    return sum(item_bytes(sent_size(canonical(each))) for each in items)


def test_an_add_of_more_rows_than_one_commit_holds_lands_whole_after_every_item(moto_env: None, clock: FakeClock):
    """A reader between its commits sees none of it (a tool call without its output is refused by the model's
    API), and its last commit makes all of it the newest items."""
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    old = history(api, address, 30)
    counted_before = usage(api, address)
    version = call(api, address, "GET").json()["version"]
    added = turn(150)
    between: list[dict[str, Any]] = []

    def read_before_each_commit(model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems":
            between.append(call(api, address, "GET").json())

    api.services.client.meta.events.register("before-call.dynamodb", read_before_each_commit)
    body = {"items": added, "add_id": "long-turn"}
    first = call(api, address, "POST", json_body=body)
    api.services.client.meta.events.unregister("before-call.dynamodb", read_before_each_commit)
    again = call(api, address, "POST", json_body=body)

    assert (first.status, first.json()["count"], again.json()["count"]) == (201, 330, 330), first.text
    # Read before the opening, each part and the last commit: the history as it was. After that commit, a write
    # no reader sees lets the head forget what it passed by (below), and the reader sees every item.
    sights = [(read["items"], read["version"]) for read in between]
    assert len(sights) >= 5
    assert sights == [(old, version)] * (len(sights) - 1) + [([*old, *added], version + 1)]
    assert stored(api, address) == [*old, *added]
    assert call(api, address, "GET").json()["version"] == version + 1
    # Nothing else is left: the head, the items and the add's claim, counted exactly.
    assert len(session_rows(api, address)) == 1 + 330 + 1
    assert usage(api, address) == counted_before + cost(added) + ROW_OVERHEAD
    # The session goes on after it.
    assert call(api, address, "POST", "/pop").json()["item"] == added[-1]
    late = {"role": "user", "content": "late"}
    call(api, address, "POST", json_body={"items": [late]})
    assert stored(api, address) == [*old, *added[:-1], late]


def test_rows_a_stopped_replacement_left_behind_never_join_a_large_add(moto_env: None, clock: FakeClock):
    """A large replacement whose writer stopped left rows above the items, and deleting them failed when its
    stage lapsed: they lie between the items and the large add's own rows, hidden by its last commit and
    deleted after it."""
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    old = history(api, address, 30)
    rows, counted_before = session_rows(api, address), usage(api, address)
    fail_transactions(api, {3, 4})  # the replacement's second part fails, and so does its letting go
    assert replace(api, address, items=compaction_of(said(200))).status == 503
    clock.advance(STAGE_LEASE)
    batches = 0

    def first_deletes_fail(model: Any, **_: Any) -> None:
        nonlocal batches
        if model.name == "BatchWriteItem":
            batches += 1
            if batches == 1:  # the lapsed stage's rows, deleted once the add's opening lets it go
                raise EndpointConnectionError(endpoint_url="http://dynamodb.invalid")

    api.services.client.meta.events.register("before-call.dynamodb", first_deletes_fail)
    added = turn(150)

    assert call(api, address, "POST", json_body={"items": added}).json()["count"] == 330

    assert stored(api, address) == [*old, *added]
    assert len(session_rows(api, address)) == len(rows) + len(added)
    assert usage(api, address) == counted_before + cost(added)


def test_a_large_add_waits_while_another_large_change_of_the_session_is_written(moto_env: None, clock: FakeClock):
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    old = history(api, address, 30)
    fail_transactions(api, {3, 4})  # a large replacement's writer stops, holding its stage
    assert replace(api, address, items=compaction_of(said(200))).status == 503

    held = call(api, address, "POST", json_body={"items": turn(150)})

    assert (held.status, held.error_code, held.json()["error"]["reason"]) == (409, "session_conflict", "held")
    assert stored(api, address) == old
    # `CairnSession` sends it again until the stage is let go: here, once the stage lapses.
    answers: list[int] = []

    def lapsing_once_refused(request: httpx.Request) -> httpx.Response:
        answer = api.handle(request)
        if request.method == "POST":
            answers.append(answer.status_code)
            if answer.status_code == 409:
                clock.advance(STAGE_LEASE)
        return answer

    base_url = address.address_url.split("/api/v1/", 1)[0]
    http = HttpClient(transport=httpx.MockTransport(lapsing_once_refused))
    asyncio.run(
        CairnSession(Address.connect(base_url, address.id, address.read_token, http=http), "s").add_items(turn(150))
    )

    assert answers == [409, 201]
    assert stored(api, address) == [*old, *turn(150)]


def test_a_large_add_held_off_for_longer_than_a_stopped_writer_holds_the_session_is_refused(
    moto_env: None, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
):
    """The server's clock stands still here, so the stage never lapses: `CairnSession` stops sending the add
    again once the wait has run out, and raises the refusal."""
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    old = history(api, address, 30)
    fail_transactions(api, {3, 4})
    assert replace(api, address, items=compaction_of(said(200))).status == 503
    monkeypatch.setattr(openai_agents_session, "_HELD_WAIT_LIMIT_SECONDS", 0.3)

    with pytest.raises(SessionConflict) as refused:
        asyncio.run(CairnSession(address, "s").add_items(turn(150)))

    assert refused.value.details["reason"] == "held"
    assert stored(api, address) == old


# -- adds larger than one request, in parts -----------------------------------------------


def part(
    api: LambdaClient, address: Address, items: list[dict[str, Any]], offset: int, more: bool, add_id: str
) -> Reply:
    return call(api, address, "POST", json_body={"items": items, "add_id": add_id, "offset": offset, "more": more})


def test_an_add_in_parts_is_seen_whole_after_its_last_part_and_after_the_adds_made_meanwhile(
    moto_env: None, clock: FakeClock
):
    """Parts sent again write nothing twice, a part past those sent is refused, and any part sent again once
    the last committed answers the count and adds nothing."""
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    old = history(api, address, 10)
    rows, counted_before = session_rows(api, address), usage(api, address)
    first, second, last = turn(3), turn(2), said(1)

    assert part(api, address, first, 0, True, "big").json()["count"] == 10
    assert part(api, address, first, 0, True, "big").json()["count"] == 10  # its answer lost, sent again
    meanwhile = {"role": "user", "content": "meanwhile"}
    assert call(api, address, "POST", json_body={"items": [meanwhile]}).json()["count"] == 11
    skipped = part(api, address, last, 10, False, "big")
    assert (skipped.status, skipped.error_code, skipped.json()["error"]["field"]) == (400, "invalid_request", "offset")
    assert part(api, address, second, 6, True, "big").json()["count"] == 11
    assert stored(api, address) == [*old, meanwhile]
    assert part(api, address, last, 10, False, "big").json()["count"] == 22
    assert part(api, address, last, 10, False, "big").json()["count"] == 22  # sent again once committed
    assert part(api, address, first, 0, True, "big").json()["count"] == 22  # and its first part too
    assert part(api, address, said(1), 0, True, "next").status == 201  # while another add in parts is open
    assert part(api, address, last, 10, False, "big").json()["count"] == 22

    added = [meanwhile, *first, *second, *last]
    assert stored(api, address) == [*old, *added]
    assert len(session_rows(api, address)) == len(rows) + len(added) + 1 + 1  # the add's claim, the open part
    assert usage(api, address) == counted_before + cost(added) + ROW_OVERHEAD + cost(said(1))
    unnamed = call(api, address, "POST", json_body={"items": last, "offset": 3, "more": True})
    assert (unnamed.status, unnamed.error_code, unnamed.json()["error"]["field"]) == (400, "invalid_request", "add_id")


def test_an_add_whose_sender_stops_between_parts_is_never_seen_and_holds_large_changes_off_until_it_lapses(
    moto_env: None, clock: FakeClock
):
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    old = history(api, address, 10)
    rows, counted_before = session_rows(api, address), usage(api, address)
    assert part(api, address, turn(20), 0, True, "stopped").status == 201

    held = replace(api, address, items=compaction_of(said(200)))  # more rows than one commit holds
    assert (held.status, held.error_code, held.json()["error"]["reason"]) == (409, "session_conflict", "held")
    held = part(api, address, said(2), 0, True, "other")
    assert (held.status, held.error_code, held.json()["error"]["reason"]) == (409, "session_conflict", "held")
    assert stored(api, address) == old

    # Once its hold lapses, the next change lets it go: its rows deleted, its bytes no longer counted.
    clock.advance(STAGE_LEASE)
    late = said(3)
    assert part(api, address, late[:2], 0, True, "other").status == 201
    assert part(api, address, late[2:], 2, False, "other").json()["count"] == 13
    assert stored(api, address) == [*old, *late]
    assert len(session_rows(api, address)) == len(rows) + len(late) + 1
    assert usage(api, address) == counted_before + cost(late) + ROW_OVERHEAD
    resumed = part(api, address, said(1), 40, False, "stopped")
    assert (resumed.status, resumed.error_code, resumed.json()["error"]["reason"]) == (
        409,
        "session_conflict",
        "parts_lost",
    )
    assert stored(api, address) == [*old, *late]


def test_cairn_session_sends_an_add_again_whole_when_its_parts_were_let_go_between_two(
    moto_env: None, clock: FakeClock
):
    """Its first part's hold lapses before the second comes (minutes of a slow network), and another large
    change lets the parts go: the second part is refused `parts_lost`, and `add_items` sends the whole add
    again, which lands once."""
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    history(api, address, 5)
    items = [{"role": "tool", "content": str(index) * 1_500_000} for index in range(3)]  # two parts by their size
    parts: list[int] = []

    def slow_between_the_first_two_parts(request: httpx.Request) -> httpx.Response:
        answer = api.handle(request)
        if request.method == "POST" and request.url.path.endswith("/items"):
            parts.append(json.loads(request.content)["offset"])
            if len(parts) == 1:
                clock.advance(STAGE_LEASE)
                assert replace(api, address, items=compaction_of(said(200))).status == 200
        return answer

    base_url = address.address_url.split("/api/v1/", 1)[0]
    http = HttpClient(transport=httpx.MockTransport(slow_between_the_first_two_parts))
    session = CairnSession(Address.connect(base_url, address.id, address.read_token, http=http), "s")

    asyncio.run(session.add_items(items))

    assert parts == [0, 2, 0, 2]
    assert stored(api, address) == [*compaction_of(said(200)), *items]  # after the change that let them go


def test_a_part_past_the_storage_limit_is_refused_and_lets_the_add_go(moto_env: None, clock: FakeClock):
    item = {"role": "tool", "content": "x" * 3000}
    head = len(b"s") + ROW_OVERHEAD
    api = LambdaClient.on_moto(clock, storage_max_bytes=head + 5 * cost([item]) + 99)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    assert part(api, address, [item] * 3, 0, True, "big").status == 201

    refused = part(api, address, [item] * 3, 3, False, "big")

    assert (refused.status, refused.error_code) == (413, "storage_limit_exceeded")
    assert stored(api, address) == []
    assert usage(api, address) == head
    # Nothing holds the session any more: another large change goes through.
    assert replace(api, address, items=[item] * 4).json()["count"] == 4


# -- replacements of the newest items, however many ---------------------------------------


def test_replacing_any_number_of_the_newest_items_keeps_the_older_ones_and_leaves_no_row_behind(
    moto_env: None, clock: FakeClock
):
    """The SDK's compaction after a run replaces that run's items, while older history stays: a run of many
    tool calls makes more items than one commit could delete, and the replacement takes them all the same."""
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    older = history(api, address, 300)[:100]
    first = {"type": "compaction", "encrypted_content": "run 1"}
    version = call(api, address, "GET").json()["version"]

    replaced = replace(api, address, items=[first], newest=200, version=version)

    assert (replaced.status, replaced.json()["count"]) == (200, 101), replaced.text
    assert stored(api, address) == [*older, first]
    assert len(session_rows(api, address)) == 1 + 101
    # The rows it hid are deleted, and the head hides nothing any more: later changes have nothing to sweep.
    head = api.services.client.get_item(
        TableName=api.services.settings.table_name,
        Key={"pk": {"S": keys.address_pk(address.id)}, "sk": {"S": keys.agent_session_head_sk("s")}},
    )["Item"]
    assert "hidden_high" not in head
    # A second run, compacted the same way, keeps the first run's summary.
    run = [{"role": "assistant", "content": f"step {index}"} for index in range(150)]
    for start in range(0, 150, 50):
        call(api, address, "POST", json_body={"items": run[start : start + 50]})
    second = {"type": "compaction", "encrypted_content": "run 2"}
    assert replace(api, address, items=[second], newest=150).json()["count"] == 102
    assert stored(api, address) == [*older, first, second]
    assert len(session_rows(api, address)) == 1 + 102
    cost = sum(item_bytes(sent_size(canonical(each))) for each in [*older, first, second])
    assert usage(api, address) == len(b"s") + ROW_OVERHEAD + cost


def test_items_a_replacement_hid_and_could_not_delete_are_passed_by_and_deleted_by_the_next(
    moto_env: None, clock: FakeClock
):
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    items = history(api, address, 150)
    rows = session_rows(api, address)
    summary = {"type": "compaction", "encrypted_content": "tail"}
    failing = True

    def deletes_fail(model: Any, **_: Any) -> None:
        if failing and model.name == "BatchWriteItem":
            raise EndpointConnectionError(endpoint_url="http://dynamodb.invalid")

    api.services.client.meta.events.register("before-call.dynamodb", deletes_fail)

    # The commit is made; the deletes after it fail, and the answer is the commit's.
    assert replace(api, address, items=[summary], newest=120).json()["count"] == 31
    failing = False
    assert len(session_rows(api, address)) == len(rows) + 1  # every old row is still stored

    # Reads, pages and pops pass the hidden rows by; adds go above them.
    assert stored(api, address) == [*items[:30], summary]
    assert asyncio.run(CairnSession(address, "s").get_items(limit=2)) == [items[29], summary]
    page = call(api, address, "GET", "?limit=2&before=140").json()
    assert page["items"] == items[28:30]
    late = {"role": "user", "content": "late"}
    call(api, address, "POST", json_body={"items": [late]})
    assert call(api, address, "POST", "/pop").json()["item"] == late
    assert call(api, address, "POST", "/pop").json()["item"] == summary
    # The next replacement of the newest items deletes them before it hides others (above them).
    newer = [{"role": "user", "content": f"newer {index}"} for index in range(3)]
    call(api, address, "POST", json_body={"items": newer})
    assert replace(api, address, items=[summary], newest=1).json()["count"] == 33
    assert stored(api, address) == [*items[:30], *newer[:2], summary]
    assert len(session_rows(api, address)) == 1 + 33


def test_a_large_replacement_past_the_last_sequence_a_key_spells_is_refused_and_changes_nothing(
    moto_env: None, clock: FakeClock
):
    """Each stage opens far above the live items: a session that has used up its sequence numbers (a million
    large replacements) is told so, and keeps its items."""
    api = LambdaClient.on_moto(clock)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    old = history(api, address, 10)
    api.services.client.update_item(
        TableName=api.services.settings.table_name,
        Key={"pk": {"S": keys.address_pk(address.id)}, "sk": {"S": keys.agent_session_head_sk("s")}},
        UpdateExpression="SET floor = :floor, last_seq = :last",
        ExpressionAttributeValues={":floor": {"N": "0"}, ":last": {"N": str(10**keys.SEQ_WIDTH - 1_000_050)}},
    )

    reply = replace(api, address, items=compaction_of(said(120)))

    assert (reply.status, reply.error_code) == (400, "invalid_request"), reply.text
    assert stored(api, address) == old
