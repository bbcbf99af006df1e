"""Strands session routes and `CairnSessionRepository` through the Lambda resolver, on moto.

Answers and paging; the claim every write names (version and writer) and
each refusal it gives; bad input as JSON errors that change nothing.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

from cairn import errors
from cairn.agent_sessions import strands
from cairn.client import Address, HttpClient
from cairn.dynamodb import table_ops
from cairn.dynamodb.strands_session_items import message_bytes, row_bytes
from cairn.integrations.strands import CairnSessionRepository, SessionConflict
from cairn.jsontext import canonical
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, Reply
from tests.support.storage_usage import counted


@pytest.fixture
def api(moto_env: None, clock: FakeClock) -> LambdaClient:
    return LambdaClient.on_moto(clock)


@pytest.fixture
def address(api: LambdaClient) -> Address:
    return Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))


def call(api: LambdaClient, address: Address, method: str, path: str = "", **parts: Any) -> Reply:
    return api.request(method, f"/api/v1/addresses/{address.id}/strands/s{path}", token=address.read_token, **parts)


WHEN = "2026-01-02T03:04:05+00:00"


def message(index: int, text: str = "") -> dict[str, Any]:
    said = {"role": "user", "content": [{"text": text or f"m{index}"}]}
    return SessionMessage(said, index, created_at=WHEN, updated_at=WHEN).to_dict()


def agent(state: dict[str, Any] | None = None) -> dict[str, Any]:
    return SessionAgent("default", state or {}, {}, created_at=WHEN, updated_at=WHEN).to_dict()


def seeded(api: LambdaClient, address: Address, messages: int = 0) -> int:
    """A session with agent `default` and `messages` messages written by run `w1`, which then released it."""
    call(api, address, "PUT", json_body={"session": Session("s", SessionType.AGENT).to_dict()})
    call(api, address, "POST", "/agents/default", json_body={"value": agent()})
    version = 1
    for index in range(messages):
        body = {"message": message(index), "if_version": version, "writer": "w1"}
        version = call(api, address, "POST", "/agents/default/messages", json_body=body).json()["version"]
    call(api, address, "POST", "/agents/default/release", json_body={"writer": "w1"})
    return version


def stored_messages(api: LambdaClient, address: Address) -> list[dict[str, Any]]:
    return call(api, address, "GET", "/agents/default/messages").json()["messages"]


def test_each_route_answers_its_documented_shape(api: LambdaClient, address: Address):
    session = Session("s", SessionType.AGENT).to_dict()
    assert call(api, address, "GET").json() == {"session_id": "s", "session": None}
    created = call(api, address, "PUT", json_body={"session": session})
    assert (created.status, created.json()) == (201, {"session_id": "s", "created": True})
    assert call(api, address, "GET").json() == {"session_id": "s", "session": session}

    made = call(api, address, "POST", "/agents/default", json_body={"value": agent()})
    assert (made.status, made.json()) == (201, {"session_id": "s", "record_id": "default", "version": 1})
    first = {"message": message(0), "if_version": 1, "writer": "w1"}
    added = call(api, address, "POST", "/agents/default/messages", json_body=first)
    assert (added.status, added.json()) == (201, {"session_id": "s", "record_id": "default", "version": 2})
    updated = call(api, address, "PUT", "/agents/default", json_body={"value": agent({"k": 1}), "if_version": 2})
    assert (updated.status, updated.json()["version"]) == (200, 3)
    read = call(api, address, "GET", "/agents/default").json()
    assert read == {"session_id": "s", "record_id": "default", "value": agent({"k": 1}), "version": 3, "messages": 1}
    redacted = {"message": message(0, "[redacted]"), "if_version": 3, "writer": "w1"}
    assert call(api, address, "PUT", "/agents/default/messages/0", json_body=redacted).json()["version"] == 4
    assert stored_messages(api, address) == [message(0, "[redacted]")]
    released = call(api, address, "POST", "/agents/default/release", json_body={"writer": "w1"})
    assert (released.status, released.json()["released"]) == (200, True)
    assert call(api, address, "POST", "/agents/default/release", json_body={"writer": "w1"}).json()["released"] is False

    missing = call(api, address, "GET", "/multi_agents/graph").json()
    assert missing == {"session_id": "s", "record_id": "graph", "value": None, "version": 0, "messages": 0}
    call(api, address, "POST", "/multi_agents/graph", json_body={"value": {"node": "a"}})
    assert (
        call(api, address, "PUT", "/multi_agents/graph", json_body={"value": {"node": "b"}, "if_version": 1}).status
        == 200
    )
    assert call(api, address, "GET", "/multi_agents/graph").json()["value"] == {"node": "b"}


def test_messages_are_read_from_an_offset_a_page_at_a_time(api: LambdaClient, address: Address):
    seeded(api, address, messages=5)

    page = call(api, address, "GET", "/agents/default/messages?offset=1&limit=2").json()
    rest = call(api, address, "GET", "/agents/default/messages?offset=3").json()
    beyond = call(api, address, "GET", "/agents/default/messages?offset=9").json()

    assert (page["messages"], page["next"]) == ([message(1), message(2)], 3)
    assert (rest["messages"], rest["next"]) == ([message(3), message(4)], None)
    assert (beyond["messages"], beyond["next"]) == ([], None)


def test_a_write_from_a_version_another_run_moved_is_refused_and_stores_nothing(api: LambdaClient, address: Address):
    version = seeded(api, address, messages=2)
    call(
        api,
        address,
        "POST",
        "/agents/default/messages",
        json_body={"message": message(2), "if_version": version, "writer": "a"},
    )
    call(api, address, "POST", "/agents/default/release", json_body={"writer": "a"})

    late = {"message": message(2, "late"), "if_version": version, "writer": "b"}
    reply = call(api, address, "POST", "/agents/default/messages", json_body=late)

    assert (reply.status, reply.error_code) == (409, "session_conflict")
    assert reply.json()["error"]["reason"] == "moved" and reply.json()["error"]["current_version"] == version + 1
    assert stored_messages(api, address) == [message(0), message(1), message(2)]


def test_a_run_holding_the_agent_keeps_others_out_until_it_releases_or_its_hold_lapses(
    api: LambdaClient, address: Address, clock: FakeClock
):
    version = seeded(api, address)
    body = {"message": message(0), "if_version": version, "writer": "a", "hold_seconds": 60}
    version = call(api, address, "POST", "/agents/default/messages", json_body=body).json()["version"]

    # Another run that read the agent after that write, at its version, is still kept out.
    intruder = {"value": agent({"by": "b"}), "if_version": version, "writer": "b"}
    held = call(api, address, "PUT", "/agents/default", json_body=intruder)
    assert (held.status, held.error_code, held.json()["error"]["reason"]) == (409, "session_conflict", "held")
    assert call(api, address, "GET", "/agents/default").json()["value"] == agent()

    clock.advance(61)
    assert call(api, address, "PUT", "/agents/default", json_body=intruder).json()["version"] == version + 1
    assert call(api, address, "POST", "/agents/default/release", json_body={"writer": "a"}).json()["released"] is False


def test_a_message_must_be_the_agents_next_one(api: LambdaClient, address: Address):
    version = seeded(api, address, messages=2)

    for index in (0, 1, 3):
        body = {"message": message(index, "again"), "if_version": version, "writer": "w1"}
        reply = call(api, address, "POST", "/agents/default/messages", json_body=body)
        assert (reply.status, reply.error_code, reply.json()["error"]["reason"]) == (409, "session_conflict", "moved")
    assert stored_messages(api, address) == [message(0), message(1)]


def test_creating_what_exists_is_refused_and_writing_what_does_not_is_not_found(api: LambdaClient, address: Address):
    seeded(api, address, messages=1)

    again = call(api, address, "PUT", json_body={"session": {"session_id": "other"}})
    agent_again = call(api, address, "POST", "/agents/default", json_body={"value": agent({"x": 1})})
    unknown = call(api, address, "PUT", "/agents/ghost", json_body={"value": agent(), "if_version": 1})
    no_message = call(
        api, address, "PUT", "/agents/default/messages/4", json_body={"message": message(4), "if_version": 2}
    )

    assert [
        (again.status, again.json()["error"]["reason"]),
        (agent_again.status, agent_again.json()["error"]["reason"]),
    ] == [
        (409, "exists"),
        (409, "exists"),
    ]
    assert (unknown.status, unknown.error_code) == (404, "not_found")
    assert (no_message.status, no_message.error_code) == (404, "not_found")
    assert call(api, address, "GET").json()["session"]["session_id"] == "s"
    assert call(api, address, "GET", "/agents/default").json()["value"] == agent()


HOSTILE = [
    ("PUT", "", {}, 422, "invalid_request"),
    ("PUT", "", {"session": []}, 422, "invalid_request"),
    ("POST", "/agents/default", {"value": agent(), "extra": 1}, 422, "invalid_request"),
    ("POST", "/agents/default", {"value": {"x": "y" * strands.MAX_STATE_BYTES}}, 413, "payload_too_large"),
    ("PUT", "/agents/default", {"value": agent()}, 422, "invalid_request"),
    ("PUT", "/agents/default", {"value": agent(), "if_version": 0}, 422, "invalid_request"),
    ("PUT", "/agents/default", {"value": agent(), "if_version": 2, "writer": "a b"}, 422, "invalid_request"),
    ("PUT", "/agents/default", {"value": agent(), "if_version": 2, "hold_seconds": 0}, 422, "invalid_request"),
    ("POST", "/agents/default/messages", {"message": {"message": {}}, "if_version": 2}, 400, "invalid_request"),
    ("POST", "/agents/default/messages", {"message": {"message_id": True}, "if_version": 2}, 400, "invalid_request"),
    ("POST", "/agents/default/messages", {"message": {"message_id": -1}, "if_version": 2}, 400, "invalid_request"),
    (
        "POST",
        "/agents/default/messages",
        {"message": {"message_id": 1, "t": "x" * 3_600_000}, "if_version": 2},
        413,
        "payload_too_large",
    ),
    ("PUT", "/agents/default/messages/0", {"message": message(1), "if_version": 2}, 400, "invalid_request"),
    ("PUT", "/agents/default/messages/x", {"message": message(0), "if_version": 2}, 422, "invalid_request"),
    ("GET", "/agents/default/messages?offset=-1", None, 422, "invalid_request"),
    ("GET", "/agents/default/messages?limit=x", None, 422, "invalid_request"),
    ("POST", "/agents/default/release", {}, 422, "invalid_request"),
    ("POST", "/agents/a%20b", {"value": agent()}, 400, "invalid_request"),
    ("GET", "/agents/" + "x" * 257, None, 400, "invalid_request"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), HOSTILE)
def test_bad_input_gets_a_json_error_and_changes_nothing(
    api: LambdaClient, address: Address, method: str, path: str, body: Any, status: int, code: str
):
    seeded(api, address, messages=1)
    before = call(api, address, "GET", "/agents/default").json()

    reply = call(api, address, method, path, json_body=body) if body is not None else call(api, address, method, path)

    assert (reply.status, reply.error_code) == (status, code), reply.text[:300]
    assert call(api, address, "GET", "/agents/default").json() == before
    assert stored_messages(api, address) == [message(0)]


def test_a_bad_json_body_is_invalid_json(api: LambdaClient, address: Address):
    seeded(api, address)

    reply = call(api, address, "PUT", "/agents/default", body=b"{nope", headers={"Content-Type": "application/json"})

    assert (reply.status, reply.error_code) == (400, "invalid_json")


def test_without_the_read_token_every_route_is_refused_alike(api: LambdaClient, address: Address):
    seeded(api, address, messages=1)
    base = f"/api/v1/addresses/{address.id}/strands/s"
    for method, path, body in [
        ("GET", "", None),
        ("PUT", "", {"session": {}}),
        ("GET", "/agents/default", None),
        ("PUT", "/agents/default", {"value": agent({"x": 1}), "if_version": 2}),
        ("POST", "/agents/default/messages", {"message": message(1), "if_version": 2}),
        ("GET", "/agents/default/messages", None),
        ("POST", "/agents/default/release", {"writer": "w1"}),
    ]:
        for token in (None, "wrong"):
            reply = api.request(method, base + path, token=token, json_body=body)
            assert (reply.status, reply.error_code) == (401, "unauthorized"), (method, path)
    assert stored_messages(api, address) == [message(0)]


# -- the repository over the routes --------------------------------------------------


def test_the_repository_round_trips_what_strands_stores(address: Address):
    repository = CairnSessionRepository(address)
    session = Session("r", SessionType.AGENT)
    repository.create_session(session)
    repository.create_agent("r", SessionAgent("default", {"n": 1}, {"removed_message_count": 0}))
    image = {"role": "user", "content": [{"image": {"format": "png", "source": {"bytes": b"\x89PNG\x00\xff"}}}]}
    sent = [
        SessionMessage(image, 0),
        *(SessionMessage({"role": "assistant", "content": [{"text": str(n)}]}, n) for n in range(1, 4)),
    ]
    for each in sent:
        repository.create_message("r", "default", each)
    sent[1].redact_message = {"role": "assistant", "content": [{"text": "[redacted]"}]}
    repository.update_message("r", "default", sent[1])

    fresh = CairnSessionRepository(address)
    assert fresh.read_session("r") == session
    assert fresh.read_agent("r", "default") == repository.read_agent("r", "default")
    assert fresh.list_messages("r", "default") == sent
    assert fresh.list_messages("r", "default", limit=2, offset=1) == sent[1:3]
    assert fresh.read_message("r", "default", 0).message["content"][0]["image"]["source"]["bytes"] == b"\x89PNG\x00\xff"
    assert fresh.read_message("r", "default", 9) is None
    assert fresh.read_session("other") is None and fresh.read_agent("r", "other") is None


def test_a_second_repository_on_a_moved_agent_gets_a_conflict_that_both_families_catch(address: Address):
    first, second = CairnSessionRepository(address), CairnSessionRepository(address)
    first.create_session(Session("r", SessionType.AGENT))
    first.create_agent("r", SessionAgent("default", {}, {}))
    second.read_agent("r", "default")
    first.create_message("r", "default", SessionMessage({"role": "user", "content": [{"text": "a"}]}, 0))

    with pytest.raises(SessionConflict) as refused:
        second.create_message("r", "default", SessionMessage({"role": "user", "content": [{"text": "b"}]}, 0))

    assert isinstance(refused.value, SessionException) and isinstance(refused.value, errors.SessionConflict)
    assert refused.value.details["reason"] == "moved"
    assert [m.message["content"][0]["text"] for m in second.list_messages("r", "default")] == ["a"]


def test_a_write_sent_again_after_it_committed_is_answered_as_it_was(api: LambdaClient, address: Address):
    version = seeded(api, address)
    body = {"message": message(0), "if_version": version, "writer": "a"}
    state = {"value": agent({"k": 1}), "if_version": version + 1, "writer": "a"}

    messages = [call(api, address, "POST", "/agents/default/messages", json_body=body) for _ in range(2)]
    states = [call(api, address, "PUT", "/agents/default", json_body=state) for _ in range(2)]
    other = call(api, address, "POST", "/agents/default/messages", json_body={**body, "writer": "b"})
    changed = call(api, address, "PUT", "/agents/default", json_body={**state, "value": agent({"k": 2})})

    assert [(m.status, m.json()["version"]) for m in messages] == [(201, version + 1)] * 2
    assert [(s.status, s.json()["version"]) for s in states] == [(200, version + 2)] * 2
    assert (other.status, other.json()["error"]["reason"]) == (409, "moved")
    assert (changed.status, changed.json()["error"]["reason"]) == (409, "moved")
    assert stored_messages(api, address) == [message(0)]
    assert call(api, address, "GET", "/agents/default").json()["value"] == agent({"k": 1})


def test_messages_larger_than_one_answer_are_read_a_page_at_a_time_and_whole(api: LambdaClient, address: Address):
    version = seeded(api, address)
    # Non-ASCII text travels escaped, several bytes a character: the page's budget counts it so.
    large = [message(index, ("é" if index % 2 else "x") * 500_000) for index in range(4)]
    for each in large:
        body = {"message": each, "if_version": version, "writer": "w1"}
        version = call(api, address, "POST", "/agents/default/messages", json_body=body).json()["version"]

    first = call(api, address, "GET", "/agents/default/messages").json()
    repository = CairnSessionRepository(address)

    assert 1 <= len(first["messages"]) < 4 and first["next"] == len(first["messages"])
    assert first["messages"] == large[: len(first["messages"])]
    assert [m.to_dict() for m in repository.list_messages("s", "default")] == large
    assert [m.to_dict() for m in repository.list_messages("s", "default", offset=1, limit=2)] == large[1:3]


def state_pieces(api: LambdaClient, address: Address) -> int:
    """The piece rows the address's Strands agents and multi-agents keep their states in."""
    settings = api.services.settings
    pieces = table_ops.query_prefix(
        api.services.client, settings.table_name, f"A#{address.id}", "C#", ProjectionExpression="sk"
    )
    return sum(1 for _ in pieces)


@pytest.mark.parametrize("path", ["/agents/default", "/multi_agents/graph"])
def test_a_state_larger_than_one_item_round_trips_and_a_smaller_one_leaves_no_piece_behind(
    api: LambdaClient, address: Address, path: str
):
    """Strands keeps what an agent's `state` holds, and a multi-agent's results of its nodes, in one value of
    any size its own file and S3 backends take: up to 3,500,000 bytes of JSON here, in pieces beside the head
    when larger than one item, replaced with the head in one commit."""
    seeded(api, address)
    created = {"results": {"writer": "w" * 1_200_000}}
    if path.startswith("/multi"):
        assert call(api, address, "POST", path, json_body={"value": created}).status == 201
    else:
        created = agent({"notes": "n" * 1_200_000})
        assert call(api, address, "PUT", path, json_body={"value": created, "if_version": 1}).status == 200
    version = call(api, address, "GET", path).json()["version"]
    assert call(api, address, "GET", path).json()["value"] == created
    used = usage(api, address)

    larger = {"results": {"writer": "w" * 2_000_000, "editor": "e" * 1_000_000}}
    body = {"value": larger, "if_version": version, "writer": "w1"}
    assert [call(api, address, "PUT", path, json_body=body).status for _ in range(2)] == [200, 200]  # a retry
    read = call(api, address, "GET", path).json()
    assert (read["value"], read["version"]) == (larger, version + 1)
    assert state_pieces(api, address) == 9
    assert usage(api, address) == used + len(canonical(larger)) - len(canonical(created))

    smaller = {"results": {}}
    body = {"value": smaller, "if_version": version + 1, "writer": "w1"}
    assert call(api, address, "PUT", path, json_body=body).status == 200
    assert call(api, address, "GET", path).json()["value"] == smaller
    assert state_pieces(api, address) == 0
    too_large = {"results": {"writer": "w" * strands.MAX_STATE_BYTES}}
    body = {"value": too_large, "if_version": version + 2, "writer": "w1"}
    assert call(api, address, "PUT", path, json_body=body).error_code == "payload_too_large"


def test_a_state_replaced_while_it_is_read_is_read_again_never_a_mix(api: LambdaClient, address: Address):
    """A state in pieces is read after its head: a replacement committing between the two reads is seen
    whole (the read goes again), never its pieces under the head before it."""
    seeded(api, address)
    first, second = agent({"notes": "a" * 1_000_000}), agent({"notes": "b" * 700_000})
    assert call(api, address, "PUT", "/agents/default", json_body={"value": first, "if_version": 1}).status == 200
    replaced = []

    def replacing_once(model: Any, **_: Any) -> None:
        if model.name == "Query" and not replaced:  # the pieces' read, after the head's
            replaced.append(call(api, address, "PUT", "/agents/default", json_body={"value": second, "if_version": 2}))

    api.services.client.meta.events.register("before-call.dynamodb", replacing_once)
    read = call(api, address, "GET", "/agents/default")

    assert [each.status for each in replaced] == [200]
    assert (read.status, read.json()["value"], read.json()["version"]) == (200, second, 3)


def test_a_message_replaced_while_a_page_reads_it_is_read_again_never_cut_short(api: LambdaClient, address: Address):
    """A message in pieces is read after its item: a redaction into more pieces committing between the two
    reads would have the page join the first of them only."""
    version = seeded(api, address)
    first, redacted = message(0, "a" * 700_000), message(0, "b" * 1_200_000)
    body = {"message": first, "if_version": version, "writer": "w1"}
    assert call(api, address, "POST", "/agents/default/messages", json_body=body).status == 201
    queries, replaced = [], []

    def replacing_at_the_pieces_read(model: Any, **_: Any) -> None:
        if model.name == "Query":
            queries.append(model.name)
            if len(queries) == 2:  # the page's items, then the first message's pieces
                body = {"message": redacted, "if_version": version + 1, "writer": "w1"}
                replaced.append(call(api, address, "PUT", "/agents/default/messages/0", json_body=body))

    api.services.client.meta.events.register("before-call.dynamodb", replacing_at_the_pieces_read)
    page = call(api, address, "GET", "/agents/default/messages")

    assert [each.status for each in replaced] == [200]
    assert (page.status, page.json()["messages"]) == (200, [redacted])


def test_strands_writes_count_against_the_address_storage_limit_to_the_byte(moto_env: None, clock: FakeClock):
    limit = 20_000
    api = LambdaClient.on_moto(clock, storage_max_bytes=limit)
    address = Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))
    version = seeded(api, address)
    session_bytes = row_bytes(canonical(Session("s", SessionType.AGENT).to_dict()), "s")
    used = session_bytes + row_bytes(canonical(agent()), "default")
    assert usage(api, address) == used

    def write(path: str, method: str, body: dict[str, Any]) -> Reply:
        return call(api, address, method, path, json_body={**body, "writer": "w1"})

    said = message(0, "x" * 5000)
    body = {"message": said, "if_version": version}
    assert [write("/agents/default/messages", "POST", body).status for _ in range(2)] == [201, 201]  # a retry
    used += message_bytes(canonical(said))
    assert usage(api, address) == used
    # Replacements move the count by what they add or free, the agent's state as its messages.
    shorter = message(0, "x" * 1000)
    assert write("/agents/default/messages/0", "PUT", {"message": shorter, "if_version": version + 1}).status == 200
    used -= 4000
    state = agent({"notes": "y" * 3000})
    assert write("/agents/default", "PUT", {"value": state, "if_version": version + 2}).status == 200
    used += len(canonical(state)) - len(canonical(agent()))
    assert usage(api, address) == used

    # One byte past the room left is refused and stores nothing; the room itself fits.
    room = limit - used
    fitting = 1 + room - message_bytes(canonical(message(1, "z")))  # a message of one "z" and as many more as fit
    over = message(1, "z" * (fitting + 1))
    refused = write("/agents/default/messages", "POST", {"message": over, "if_version": version + 3})
    assert (refused.status, refused.error_code) == (413, "storage_limit_exceeded"), refused.text
    assert refused.json()["error"]["used_bytes"] == used
    assert call(api, address, "GET", "/agents/default").json()["version"] == version + 3
    assert len(stored_messages(api, address)) == 1
    exact = message(1, "z" * fitting)
    assert write("/agents/default/messages", "POST", {"message": exact, "if_version": version + 3}).status == 201
    assert usage(api, address) == limit
    bigger_state = write("/agents/default", "PUT", {"value": agent({"notes": "y" * 3001}), "if_version": version + 4})
    assert bigger_state.error_code == "storage_limit_exceeded"
    assert call(api, address, "GET", "/agents/default").json()["value"] == state
    assert call(api, address, "POST", "/multi_agents/graph", json_body={"value": {}}).error_code == (
        "storage_limit_exceeded"
    )
    # The repository raises it as Strands' own error, which says what is stored.
    with pytest.raises(SessionException) as raised:
        CairnSessionRepository(address).create_session(Session("t", SessionType.AGENT))
    assert isinstance(raised.value, errors.StorageLimitExceeded)
    assert raised.value.details["used_bytes"] == limit


def usage(api: LambdaClient, address: Address) -> int:
    return counted(api.services.settings, address.id)
