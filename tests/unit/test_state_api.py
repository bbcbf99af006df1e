"""Durable state through the Lambda resolver, on the in-memory address ports."""

from __future__ import annotations

import json
import re

import pytest

from cairn.addresses import state as state_module
from cairn.addresses.state import PER_KEY_OVERHEAD, entry_size
from tests.support.lambda_client import LambdaClient, path_of


class StateClient:
    """Small helper speaking the state routes of one address."""

    def __init__(self, api: LambdaClient, created: dict) -> None:
        self.api = api
        self.created = created
        self.root = path_of(created["endpoints"]["state_url"])
        self.token = created["credentials"]["read_token"]

    def put(self, key: str, value, if_revision: int | None = None):
        body = {"value": value} if if_revision is None else {"value": value, "if_revision": if_revision}
        return self.api.request("PUT", f"{self.root}/{key}", json_body=body, token=self.token)

    def get(self, key: str):
        return self.api.request("GET", f"{self.root}/{key}", token=self.token)

    def delete(self, key: str, if_match: str | None = None):
        headers = {"If-Match": if_match} if if_match is not None else None
        return self.api.request("DELETE", f"{self.root}/{key}", headers=headers, token=self.token)

    def keys(self):
        return self.api.request("GET", self.root, token=self.token)

    def batch(self, operations: list[dict]):
        return self.api.request("POST", self.root, json_body={"operations": operations}, token=self.token)

    def events(self) -> list[dict]:
        return self.api.poll(self.created, limit=1000).json()["events"]


@pytest.fixture
def state(memory_api: LambdaClient) -> StateClient:
    return StateClient(memory_api, memory_api.provision())


def test_accounting_counts_key_canonical_value_and_overhead():
    assert entry_size("k", '{"a":1}') == 1 + 7 + PER_KEY_OVERHEAD
    assert entry_size("é", '"é"') == 2 + 4 + PER_KEY_OVERHEAD


def test_create_replace_read_and_list(state: StateClient):
    created = state.put("progress", {"step": 1})
    assert created.status == 201
    assert created.json()["revision"] == 1
    replaced = state.put("progress", {"step": 2})
    assert replaced.status == 200
    assert replaced.json() == {**replaced.json(), "key": "progress", "value": {"step": 2}, "revision": 2}
    read = state.get("progress")
    assert read.json()["value"] == {"step": 2}
    assert read.headers["ETag"] == '"2"'
    listing = state.keys().json()
    assert [(k["key"], k["revision"]) for k in listing["keys"]] == [("progress", 2)]
    size = entry_size("progress", '{"step":2}')
    assert listing["keys"][0]["size"] == size
    assert listing["usage"] == {"keys": 1, "bytes": size, "max_keys": 32, "max_bytes": 65536}


def test_unknown_key_is_not_found(state: StateClient):
    reply = state.get("missing")
    assert reply.status == 404
    assert reply.error_code == "not_found"


def test_compare_and_set_conflicts_change_nothing(state: StateClient):
    state.put("todo", ["a"])
    stale = state.put("todo", ["a", "b"], if_revision=7)
    assert stale.status == 409
    assert stale.error_code == "revision_conflict"
    assert stale.json()["error"]["current_revision"] == 1
    create_only = state.put("todo", ["x"], if_revision=0)
    assert create_only.status == 409
    missing = state.put("other", 1, if_revision=3)
    assert missing.status == 409
    assert missing.json()["error"]["current_revision"] is None
    assert state.get("todo").json()["value"] == ["a"]
    assert [e["data"] for e in state.events()] == [
        {"key": "todo", "op": "set", "revision": 1, "size": entry_size("todo", '["a"]')}
    ]
    assert state.put("todo", ["a", "b"], if_revision=1).json()["revision"] == 2
    assert state.put("fresh", True, if_revision=0).status == 201


@pytest.mark.parametrize("revision", [True, "1", 1.0])
def test_a_revision_that_is_no_integer_is_refused_and_changes_nothing(state: StateClient, revision):
    """`true` passed as revision 1 and `"1"` as 1: a client's mistake became a write it never meant."""
    state.put("todo", ["a"])
    refused = state.put("todo", ["b"], if_revision=revision)
    assert (refused.status, refused.error_code) == (422, "invalid_request")
    batch = state.batch([{"op": "set", "key": "todo", "value": ["c"], "if_revision": revision}])
    assert (batch.status, batch.error_code) == (422, "invalid_request")
    assert state.get("todo").json()["value"] == ["a"]


def test_every_change_is_a_state_updated_event(state: StateClient):
    state.put("a", 1)
    state.put("a", 2)
    state.delete("a")
    events = state.events()
    assert [e["type"] for e in events] == ["state.updated"] * 3
    assert [e["source"] for e in events] == ["state"] * 3
    assert [(e["data"]["op"], e["data"]["revision"]) for e in events] == [("set", 1), ("set", 2), ("delete", 3)]
    assert events[2]["data"]["size"] == 0


@pytest.mark.parametrize("if_match", ["2", '"2"', 'W/"2"'])
def test_delete_honours_if_match(state: StateClient, if_match: str):
    state.put("k", "v1")
    state.put("k", "v2")
    assert state.delete("k", if_match="1").status == 409
    reply = state.delete("k", if_match=if_match)
    assert reply.status == 200
    assert reply.json() == {"key": "k", "deleted": True, "revision": 3}
    assert state.get("k").status == 404
    assert state.delete("k").status == 404
    assert state.delete("k", if_match="3").json()["error"]["current_revision"] is None


def test_bad_if_match_is_refused(state: StateClient):
    state.put("k", 1)
    reply = state.delete("k", if_match="abc")
    assert reply.status == 400
    assert state.get("k").status == 200


def test_recreated_key_continues_its_revisions(state: StateClient):
    state.put("k", 1)
    state.put("k", 2)
    state.delete("k")
    recreated = state.put("k", 3)
    assert recreated.status == 201
    assert recreated.json()["revision"] == 4
    assert state.put("k", 5, if_revision=2).status == 409, "an old revision never matches again"


def test_batch_applies_all_with_consecutive_events(state: StateClient):
    state.put("gone", 0)
    reply = state.batch(
        [
            {"key": "a", "op": "set", "value": {"n": 1}},
            {"key": "b", "op": "set", "value": None, "if_revision": 0},
            {"key": "gone", "op": "delete", "if_revision": 1},
        ]
    )
    assert reply.status == 200, reply.text
    body = reply.json()
    assert body["results"] == [
        {"key": "a", "op": "set", "revision": 1, "value": {"n": 1}},
        {"key": "b", "op": "set", "revision": 1, "value": None},
        {"key": "gone", "op": "delete", "revision": 2},
    ]
    assert body["usage"]["keys"] == 2
    events = state.events()
    assert [e["sequence"] for e in events] == [1, 2, 3, 4]
    assert [e["data"]["key"] for e in events[1:]] == ["a", "b", "gone"]


def test_batch_with_stale_revisions_names_every_conflict_and_changes_nothing(state: StateClient):
    state.put("a", 1)
    state.put("b", 1)
    reply = state.batch(
        [
            {"key": "a", "op": "set", "value": 2, "if_revision": 1},
            {"key": "b", "op": "set", "value": 2, "if_revision": 5},
            {"key": "c", "op": "set", "value": 2, "if_revision": 2},
        ]
    )
    assert reply.status == 409
    assert reply.json()["error"]["conflicts"] == [
        {"key": "b", "current_revision": 1},
        {"key": "c", "current_revision": None},
    ]
    assert state.get("a").json()["revision"] == 1
    assert len(state.events()) == 2


@pytest.mark.parametrize(
    "operations",
    [
        [],
        [{"key": "a", "op": "set"}],
        [{"key": "a", "op": "rename", "value": 1}],
        [{"key": "a", "op": "set", "value": 1}, {"key": "a", "op": "delete"}],
        [{"key": f"k{n}", "op": "set", "value": n} for n in range(33)],
    ],
)
def test_malformed_batches_are_refused(state: StateClient, operations):
    reply = state.batch(operations)
    assert reply.status in (400, 422), reply.text
    assert reply.error_code == "invalid_request"
    assert state.keys().json()["keys"] == []


@pytest.mark.parametrize("key", ["has space", "x" * 129, "slash%2Fkey", "ü"])
def test_invalid_keys_are_refused(state: StateClient, key: str):
    reply = state.put(key, 1)
    assert reply.status in (400, 404)
    assert state.keys().json()["keys"] == []


def test_a_percent_encoded_key_names_the_same_key(state: StateClient):
    """API Gateway hands the path over still encoded; a client encoding every reserved character sends `a%3Ab`."""
    assert state.put("run%3A1", 1).status == 201
    read = state.get("run:1").json()
    assert (read["key"], read["value"], read["revision"]) == ("run:1", 1, 1)
    assert state.put("run:1", 2).json()["revision"] == 2
    assert state.delete("run%3a1").status == 200
    assert state.keys().json()["keys"] == []
    refused = state.put("run%253A1", 1)
    assert refused.status == 400, "decoded once: `%253A` is the text `%3A`, which no key holds"
    assert state.keys().json()["keys"] == []


@pytest.mark.parametrize("key", [".", ".."])
def test_keys_no_url_can_name_are_refused_in_a_batch(state: StateClient, key: str):
    """A client resolves `.` and `..` in a path, so a key set under either could never be read by its URL."""
    reply = state.batch([{"op": "set", "key": key, "value": 1}, {"op": "set", "key": "kept", "value": 2}])
    assert (reply.status, reply.error_code) == (400, "invalid_request")
    assert state.keys().json()["keys"] == []
    fine = [{"op": "set", "key": other, "value": 1} for other in ("...", ".x", "x..")]
    assert state.batch(fine).status == 200, "other dotted keys are fine"


def test_a_dot_key_an_older_version_let_a_batch_set_can_still_be_deleted(
    state: StateClient, monkeypatch: pytest.MonkeyPatch
):
    with monkeypatch.context() as older:
        older.setattr(state_module, "KEY_PATTERN", re.compile(r"[A-Za-z0-9._:-]{1,128}"))
        assert state.batch([{"op": "set", "key": "..", "value": 1}]).status == 200
    assert [entry["key"] for entry in state.keys().json()["keys"]] == [".."]
    assert state.batch([{"op": "set", "key": "..", "value": 2}]).status == 400, "never set again"
    assert state.batch([{"op": "delete", "key": ".."}]).status == 200
    assert state.keys().json()["keys"] == []


def test_byte_limit_is_exact(state: StateClient):
    limit = 65_536
    state.put("a", "x" * 1000)
    used = entry_size("a", json.dumps("x" * 1000))
    # A string value of n characters costs n + 2 quote bytes.
    room = limit - used - entry_size("b", '""')
    assert state.put("b", "x" * (room + 1)).status == 413
    over = state.put("b", "x" * (room + 1))
    assert over.error_code == "state_limit_exceeded"
    assert over.json()["error"]["max_bytes"] == limit
    exact = state.put("b", "x" * room)
    assert exact.status == 201
    assert state.keys().json()["usage"]["bytes"] == limit
    assert state.put("c", 1).status == 413
    assert state.put("b", "x" * (room - 1)).status == 200, "shrinking always fits"


def test_key_limit_is_exact(state: StateClient):
    for n in range(32):
        assert state.put(f"k{n}", n).status == 201
    extra = state.put("k32", 32)
    assert extra.status == 409
    assert extra.error_code == "state_limit_exceeded"
    assert state.put("k0", "replaced").status == 200, "replacing a key adds none"
    assert state.delete("k1").status == 200
    assert state.put("k32", 32).status == 201


def test_full_feed_blocks_state_writes(clock):
    api = LambdaClient.in_memory(clock, max_events=2, owner_reserved_events=0)
    state = StateClient(api, api.provision())
    state.put("a", 1)
    state.put("a", 2)
    blocked = state.put("a", 3)
    assert blocked.status == 409
    assert blocked.error_code == "quota_exceeded"
    assert state.get("a").json() | {"updated_at": None} == {"key": "a", "value": 2, "revision": 2, "updated_at": None}


def test_state_outlives_event_retention_but_not_the_address(clock):
    api = LambdaClient.in_memory(clock, event_retention_seconds=3600)
    created = api.provision(expires_in_seconds=7200)
    state = StateClient(api, created)
    state.put("checkpoint", {"done": 3})
    clock.advance(3601)
    assert state.events() == []
    assert state.get("checkpoint").json()["value"] == {"done": 3}
    clock.advance(3600)
    assert state.get("checkpoint").status == 401


def test_another_addresss_token_cannot_touch_state(state: StateClient, memory_api: LambdaClient):
    other = memory_api.provision()
    state.put("secret", "mine")
    intruder = StateClient(memory_api, {**state.created, "credentials": other["credentials"]})
    assert intruder.get("secret").status == 401
    assert intruder.put("secret", "theirs").status == 401
    assert intruder.keys().status == 401
    assert state.get("secret").json()["value"] == "mine"


def test_describe_reports_state_usage(state: StateClient, memory_api: LambdaClient):
    state.put("a", 1)
    detail = memory_api.request("GET", path_of(state.created["endpoints"]["address_url"]), token=state.token).json()
    assert detail["state"] == {"keys": 1, "bytes": entry_size("a", "1"), "max_keys": 32, "max_bytes": 65536}


def test_a_batch_larger_than_the_feed_is_refused_by_the_quota(clock):
    api = LambdaClient.in_memory(clock, max_events=2, owner_reserved_events=0)
    state = StateClient(api, api.provision())
    operations = [{"key": f"k{n}", "op": "set", "value": n} for n in range(3)]
    refused = state.batch(operations)
    assert refused.status == 409 and refused.error_code == "quota_exceeded"
    assert state.keys().json()["keys"] == []


def test_a_debug_log_names_the_route_arguments_without_copying_the_value(
    state: StateClient, caplog: pytest.LogCaptureFixture
):
    # Powertools formats a route's arguments into a debug message on every request, logged or not.
    secret = "sk_live_" + "x" * 4096
    with caplog.at_level("DEBUG", logger="aws_lambda_powertools.event_handler"):
        assert state.put("credentials", {"api_key": secret}).status == 201
    calls = [record.getMessage() for record in caplog.records if "Calling API Route Handler" in record.getMessage()]
    assert calls == ["Calling API Route Handler: {'address_id': str, 'key': str, 'body': PutStateRequest}"]
    assert not [record for record in caplog.records if secret in record.getMessage()]
    assert state.get("credentials").json()["value"] == {"api_key": secret}
