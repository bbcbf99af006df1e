"""The memory routes through the resolver on moto: appends, reads, errors, the runtime key."""

from __future__ import annotations

import re

import pytest

from tests.support.fakes import FakeClock
from tests.support.lambda_client import LAMBDA_ANSWER_LIMIT, LambdaClient

EVENTS = "/api/v1/memory/chat.assistant/runs/run-1/events"
KEY = "memory-key"


@pytest.fixture
def api(moto_env, clock: FakeClock) -> LambdaClient:
    return LambdaClient.on_moto(clock, runtime_key=KEY)


def post(api: LambdaClient, body, path: str = EVENTS, token: str | None = KEY):
    raw = body if isinstance(body, str) else None
    json_type = {"Content-Type": "application/json"}
    return api.request("POST", path, json_body=None if raw else body, body=raw, headers=json_type, token=token)


def test_events_round_trip_with_exact_numbers(api: LambdaClient):
    body = (
        '{"events": [{"type": "user_message", "timestamp": "2026-11-29T12:00:00.123Z",'
        ' "data": {"message": "hi", "structured": {"big": 9007199254740993, "ratio": 0.10, "e": 1e3}},'
        ' "labels": {"role": "user"}}, {"type": "planner_note", "data": {"note": "look it up"}}]}'
    )
    created = post(api, body)
    assert created.status == 201, created.text
    assert created.json() == {"agent_id": "chat.assistant", "run_id": "run-1", "sequences": [1, 2]}
    assert post(api, {"events": [{"type": "planner_note", "data": {"note": "again"}}]}).json()["sequences"] == [3]

    read = api.request("GET", EVENTS, token=KEY)
    assert read.status == 200, read.text
    assert '"structured":{"big":9007199254740993,"ratio":0.10,"e":1e3}' in read.text
    page = read.json()
    assert [event["sequence"] for event in page["events"]] == [1, 2, 3]
    assert page["events"][0]["timestamp"] == "2026-11-29T12:00:00.123Z"
    assert page["events"][0]["labels"] == {"role": "user"}
    assert page["events"][1]["data"] == {"note": "look it up"}
    assert (page["next_cursor"], page["has_more"]) == (3, False)


def test_reads_page_with_after_and_limit(api: LambdaClient):
    post(api, {"events": [{"type": "planner_note", "data": {"note": str(n)}} for n in range(5)]})
    first = api.request("GET", EVENTS + "?limit=2", token=KEY).json()
    assert [e["data"]["note"] for e in first["events"]] == ["0", "1"] and first["has_more"]
    rest = api.request("GET", EVENTS + f"?after={first['next_cursor']}", token=KEY).json()
    assert [e["sequence"] for e in rest["events"]] == [3, 4, 5] and not rest["has_more"]
    empty = api.request("GET", "/api/v1/memory/chat.assistant/runs/unknown/events", token=KEY).json()
    assert empty["events"] == [] and empty["next_cursor"] == 0


@pytest.mark.parametrize("token", [None, "wrong"])
def test_memory_and_runtime_routes_share_the_runtime_key(api: LambdaClient, token):
    for reply in (
        post(api, {"events": [{"type": "planner_note", "data": {"note": "x"}}]}, token=token),
        api.request("GET", EVENTS, token=token),
        api.request("POST", "/api/v1/runtime/load_run", json_body={"run_id": "r"}, token=token),
    ):
        assert reply.status == 401
        assert reply.json()["error"] == {
            "code": "unauthorized",
            "message": "The runtime and memory routes need the runtime key as a bearer token.",
        }


def test_without_a_runtime_key_the_routes_are_open(moto_env, clock: FakeClock):
    api = LambdaClient.on_moto(clock)
    assert post(api, {"events": [{"type": "planner_note", "data": {"note": "x"}}]}, token=None).status == 201


@pytest.mark.parametrize(
    ("body", "status", "code", "message"),
    [
        ("{", 400, "invalid_json", "not valid JSON"),
        (  # an exponent past what Python's Decimal holds
            '{"events": [{"type": "user_message", "data": {"message": "hi", "structured": 1e-1000000000000000000000}}]}',
            400,
            "invalid_json",
            "exponent is out of range",
        ),
        (
            {
                "events": [
                    {
                        "type": "tool_call",
                        "data": {"tool_call_id": "c", "tool_name": "t", "payload": "1e99999999999999999999"},
                    }
                ]
            },
            400,
            "invalid_request",
            "JSON text",
        ),
        ({"event": []}, 400, "invalid_request", "The body must be"),
        ({"events": []}, 400, "invalid_request", "events must not be empty"),
        ({"events": ["note"]}, 400, "invalid_request", r"events\[0\] must be an object"),
        ({"events": [{"type": "planner_note", "note": "x"}]}, 400, "invalid_request", 'unknown field "note"'),
        ({"events": [{"type": "chat"}]}, 400, "invalid_request", 'unknown event type "chat"'),
        (
            {"events": [{"type": "planner_note", "data": {"note": "x"}, "timestamp": "yesterday"}]},
            400,
            "invalid_request",
            "not an RFC 3339 time",
        ),
        (
            {"events": [{"type": "tool_call", "data": {"tool_call_id": "c"}}]},
            400,
            "invalid_request",
            'tool_call requires "tool_name"',
        ),
        (
            {"events": [{"type": "planner_note", "data": {"note": "x"}}] * 100},
            413,
            "payload_too_large",
            "one DynamoDB transaction",
        ),
    ],
)
def test_bad_appends_get_a_clear_error_and_change_nothing(api: LambdaClient, body, status, code, message):
    reply = post(api, body)
    assert (reply.status, reply.error_code) == (status, code), reply.text
    assert re.search(message, reply.json()["error"]["message"])
    assert api.request("GET", EVENTS, token=KEY).json()["events"] == []


def test_ids_that_are_not_key_safe_are_refused(api: LambdaClient):
    reply = post(
        api,
        {"events": [{"type": "planner_note", "data": {"note": "x"}}]},
        path="/api/v1/memory/chat*assistant/runs/run-1/events",
    )
    assert (reply.status, reply.error_code) == (400, "invalid_request")
    assert api.request("GET", "/api/v1/memory/a/runs/r*1/events", token=KEY).status == 400


def test_the_routes_are_in_the_openapi_document(api: LambdaClient):
    paths = api.request("GET", "/openapi.json").json()["paths"]
    assert {"get", "post"} <= set(paths["/api/v1/memory/{agent_id}/runs/{run_id}/events"])


def test_labels_too_large_to_sit_beside_the_data_are_refused_and_change_nothing(api: LambdaClient):
    """They share the event's item with its data, which DynamoDB caps at 400 KB: this was a 500."""
    refused = post(api, {"events": [{"type": "planner_note", "data": {"note": "n"}, "labels": {"k": "x" * 500_000}}]})
    assert (refused.status, refused.json()["error"]["code"]) == (413, "payload_too_large")
    assert api.request("GET", EVENTS, token=KEY).json()["events"] == []


def test_pages_count_labels_as_lambda_escapes_them_and_lose_nothing(api: LambdaClient):
    """160 events whose labels are control characters (7 bytes each in an answer) once made a 7.3 MB page."""
    labels = {"k": "\x01" * 6_500}
    for _ in range(2):
        events = [{"type": "planner_note", "data": {"note": "n"}, "labels": labels} for _ in range(80)]
        assert post(api, {"events": events}).status == 201
    seen, after = 0, 0
    while True:
        reply, size = api.sent("GET", EVENTS + f"?after={after}&limit=1000", token=KEY)
        assert reply.status == 200 and size < LAMBDA_ANSWER_LIMIT
        page = reply.json()
        seen += len(page["events"])
        if not page["has_more"]:
            break
        after = page["next_cursor"]
    assert seen == 160, "nothing lost, nothing repeated"
