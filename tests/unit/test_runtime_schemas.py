"""The published runtime schemas describe exactly what `wire` reads and writes.

A realistic session of every method runs on the reference store; each
command's JSON form must satisfy its route's request schema and each answer
its response schema. Required and optional fields are checked against the
decoder itself, one field at a time.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import jsonschema
import pytest

from cairn.api import runtime_schemas
from cairn.api.routes import memory as memory_routes
from cairn.runtime import wire
from cairn.runtime.inmem import InMemoryRuntimeStore
from cairn.runtime.methods import (
    METHODS,
    CreateSession,
    EndSession,
    RunRecordsQuery,
    RunRef,
    RunsBySession,
    SeedRecordsQuery,
    SeedRef,
    SessionRecordsQuery,
    SessionRef,
    TranscriptQuery,
)
from cairn.runtime.model import (
    TRANSCRIPT_APPENDED,
    LiteralPart,
    PreparationAttempt,
    PromptScope,
    RenderedPrompt,
    RunStart,
    RunStatus,
    SeedPublication,
    SynchronousRunStart,
)
from cairn.transcript import exactjson
from cairn.transcript.memory import check_event
from tests.contract import builders

# jsonschema checks `date-time` only with an optional package; this is RFC 3339's grammar.
RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})")
CHECKER = jsonschema.FormatChecker(formats=())
CHECKER.checks("date-time")(lambda text: not isinstance(text, str) or RFC3339.fullmatch(text) is not None)


def request_schema(name: str) -> dict[str, Any]:
    return runtime_schemas.request_body(METHODS[name])["content"]["application/json"]["schema"]


def response_schema(name: str) -> dict[str, Any]:
    return runtime_schemas.responses(METHODS[name])[200]["content"]["application/json"]["schema"]


def validate(instance: Any, schema: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(schema, format_checker=CHECKER).validate(instance)


def session_of_every_method(answers: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(method, command) in an order the store accepts, each method at least once; `answers` holds the last
    answer of each method so far."""
    root = builders.run_start()
    child = builders.run_start("child", agent="child-agent", parent=root.run_id)
    solo = builders.run_start("solo", session="")
    yield "create_session", CreateSession("session", builders.T0)
    yield "load_session", SessionRef("session")
    yield "load_session_status", SessionRef("session")
    yield from seed_steps(builders.run_start("seeded"), answers)
    yield "start_root_run", builders.root_start(root)
    yield "start_child_run", builders.child_start(child.run_id, root.run_id)
    yield "append_run_record", builders.note(root, "note", type_=TRANSCRIPT_APPENDED, body=b'{"messages":[]}')
    yield "list_runs_by_session", RunsBySession("session", [RunStatus.RUNNING])
    yield "list_run_records", RunRecordsQuery(root.run_id, limit=10)
    yield "list_session_run_records", SessionRecordsQuery("session")
    yield "list_run_transcript_records", TranscriptQuery(root.run_id, answers["append_run_record"].id)
    yield "record_run_suspension", builders.suspension(child)
    yield "repair_run_suspension", builders.suspension(child)
    yield "load_run_suspension", RunRef(child.run_id)
    yield "record_run_cancellation", builders.cancellation(root)
    yield "record_run_terminal", builders.terminal(root, RunStatus.CANCELED, reason="user_requested")
    yield "repair_run_terminal", builders.terminal(root, RunStatus.CANCELED, reason="user_requested")
    yield "load_run", RunRef(root.run_id)
    yield "start_one_shot_run", builders.one_shot_start(solo.run_id)
    at_once = builders.one_shot_start("at-once")
    yield "start_synchronous_run", SynchronousRunStart(at_once.run, at_once.started)
    yield "start_one_shot_child_run", builders.one_shot_child_start(parent=solo.run_id)
    yield "end_session", EndSession("session", builders.T0 + timedelta(seconds=5))
    yield "purge_session", SessionRef("session")


def seed_steps(run: RunStart, answers: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Initial history of `run`: a literal in two parts, the compiled start, publication and reads."""
    prompt = RenderedPrompt("greeting", "v1", PromptScope("session", {"tier": "gold"}))
    d = replace(builders.declaration(run), rendered_prompts=[prompt])
    yield "begin_run_seed", d
    yield "append_run_seed", builders.seed_append(d, "a", "0", literal_part=LiteralPart(b"[", False))
    yield "append_run_seed", builders.seed_append(d, "b", "1", literal_part=LiteralPart(b"]", True))
    yield "append_run_seed", builders.seed_append(d, "c", "2", prepared=builders.PREPARED)
    yield "publish_run_seed", SeedPublication(run.run_id, d.attempt_id, "2", "3", len(builders.PREPARED))
    yield "find_run_preparation", builders.operation(d)
    yield "settle_run_preparation", PreparationAttempt(builders.operation(d), d.attempt_id)
    yield "load_run_seed", SeedRef(run.run_id, "2")
    yield "list_run_seed_records", SeedRecordsQuery(run.run_id, "2", limit=1)
    yield "list_run_preparation_records", SeedRecordsQuery(run.run_id, "3")
    assert answers["list_run_seed_records"].next_cursor == "1"


def test_every_command_and_answer_of_a_session_matches_its_schema():
    store = InMemoryRuntimeStore()
    answers: dict[str, Any] = {}
    for name, command in session_of_every_method(answers):
        method = METHODS[name]
        assert isinstance(command, method.request), name
        body = wire.encode(command)
        validate(body, request_schema(name))
        answers[name] = method.call(store, wire.decode(method.request, body))
        validate(wire.encode(answers[name]), response_schema(name))
    assert set(answers) == set(METHODS)


def objects_with_properties(schema: Any, where: str = "body") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object schema inside `schema`, with the path of its value."""
    if isinstance(schema, dict):
        if "properties" in schema:
            yield where, schema
            for name, item in schema["properties"].items():
                yield from objects_with_properties(item, f"{where}.{name}")
        for item in schema.get("anyOf", []):
            yield from objects_with_properties(item, where)


def full_example(schema: dict[str, Any]) -> Any:
    """A value with every property present, valid for the decoder's types."""
    if "anyOf" in schema:
        return full_example(next(option for option in schema["anyOf"] if option.get("type") != "null"))
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" and "properties" in schema:
        return {name: full_example(item) for name, item in schema["properties"].items()}
    if kind == "object":
        return {"k": "v"}
    if kind == "array":
        return [full_example(schema["items"])]
    if schema.get("format") == "date-time":
        return "2026-11-29T12:00:00.123Z"
    if schema.get("contentEncoding") == "base64":
        return "e30="
    return {"string": "text", "integer": 1, "boolean": True}[kind]


def at(document: dict[str, Any], where: str) -> dict[str, Any]:
    for name in where.split(".")[1:]:
        document = document[name]
    return document


@pytest.mark.parametrize("name", sorted(METHODS))
def test_required_and_unknown_fields_are_the_decoders(name: str):
    method = METHODS[name]
    schema = request_schema(name)
    complete = full_example(schema)
    validate(complete, schema)
    wire.decode(method.request, complete)
    for where, object_schema in objects_with_properties(schema):
        assert object_schema["additionalProperties"] is False
        for field in object_schema["properties"]:
            without = copy.deepcopy(complete)
            del at(without, where)[field]
            if field in object_schema.get("required", []):
                with pytest.raises(wire.WireError, match="is required"):
                    wire.decode(method.request, without)
            else:
                wire.decode(method.request, without)
        extra = copy.deepcopy(complete)
        at(extra, where)["unknown"] = 1
        with pytest.raises(wire.WireError, match="unknown field"):
            wire.decode(method.request, extra)


@pytest.mark.parametrize(
    ("text", "accepted"),
    [("", True), ("e30=", True), ("AAECAw==", True), ("e30", False), ("e3*=", False), ("e30==", False)],
)
def test_the_base64_pattern_is_the_decoders(text: str, accepted: bool):
    schema = runtime_schemas.BASE64
    decoded = True
    try:
        wire.decode(bytes, text)
    except wire.WireError:
        decoded = False
    assert decoded is accepted
    assert jsonschema.Draft202012Validator(schema).is_valid(text) is accepted


def test_links_name_methods_and_fields_that_exist():
    for source, links in runtime_schemas.LINKS.items():
        assert source in METHODS
        for link in links.values():
            target = link["operationId"].removeprefix("runtime_")
            complete = full_example(request_schema(target))
            assert_keys_exist(link["requestBody"], complete, target)


def assert_keys_exist(body: dict[str, Any], example: dict[str, Any], target: str) -> None:
    for key, value in body.items():
        assert key in example, (target, key)
        if isinstance(value, dict):
            assert_keys_exist(value, example[key], target)


def test_error_statuses_name_every_runtime_error_code():
    described = runtime_schemas.runtime_error_codes()
    assert {401, 404, 409, 410, 503} <= set(described)
    assert "run_not_found" in described[404] and "temporarily_unavailable" in described[503]


def test_memory_events_of_every_type_match_the_published_body():
    schema = memory_routes.APPEND_BODY["content"]["application/json"]["schema"]
    events = [
        {
            "type": "user_message",
            "timestamp": "2026-11-29T12:00:00.123Z",
            "data": {"message": "hi", "structured": {"n": 1}},
        },
        {"type": "assistant_message", "data": {"message": "hello"}, "labels": {"role": "assistant"}},
        {"type": "tool_call", "data": {"tool_call_id": "c1", "tool_name": "search", "payload": "{}"}},
        {"type": "tool_result", "data": {"tool_call_id": "c1", "tool_name": "search", "result_json": "[]"}},
        {"type": "planner_note", "timestamp": None, "data": {"note": "next"}},
        {"type": "thinking", "data": {"text": "hmm", "redacted": "e30=", "final": True}},
    ]
    validate({"events": events}, schema)
    assert {event["type"] for event in events} == set(memory_routes.EVENT_FIELDS)
    for index, event in enumerate(memory_routes.events_from_body(exactjson.dumps({"events": events}).encode())):
        check_event(event, f"events[{index}]")
    for invalid in (
        {"events": []},
        {"events": [{"type": "planner_note", "data": {}}]},
        {"events": [{"type": "planner_note", "data": {"note": "x", "extra": 1}}]},
        {"events": [{"type": "unknown"}]},
        {"events": [], "more": 1},
    ):
        assert not jsonschema.Draft202012Validator(schema).is_valid(invalid), invalid
