"""Product memory over HTTP: a run's ordered events, appended and read back.

Same authorization as the runtime routes (IAM in AWS, the runtime key as a
bearer token under `cairn serve`). Bodies are read and written with exact
numbers, so structured data comes back as it was sent.
"""

from datetime import datetime
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query

from cairn import jsontext
from cairn.api import runtime_key
from cairn.api.requests import json_body
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.events import MAX_CURSOR
from cairn.api.runtime_schemas import BASE64, TIME, error_responses
from cairn.api.schemas import MemoryAppendResponse, MemorySnapshotResponse
from cairn.errors import InvalidJson, InvalidRequest
from cairn.runtime.wire import WireError, decode, format_time
from cairn.services import Services
from cairn.transcript import exactjson
from cairn.transcript.errors import MemoryRequestError
from cairn.transcript.memory import EVENT_FIELDS, MAX_EVENTS_PER_APPEND, REQUIRED_FIELDS, MemoryEvent, MemorySnapshot

EVENTS_PATH = "/api/v1/memory/<agent_id>/runs/<run_id>/events"
EVENT_KEYS = ("type", "timestamp", "data", "labels")
# The JSON Schema of each kind of `data` value the memory store accepts, by the name it gives the kind.
DATA_VALUE_SCHEMAS: dict[str, dict[str, Any]] = {
    "a string": {"type": "string"},
    "an integer": {"type": "integer"},
    "true or false": {"type": "boolean"},
    "any JSON value": {},
    "an object": {"type": "object"},
    "JSON text": {"type": "string", "contentMediaType": "application/json"},
    "base64 text": BASE64,
}
# The path ids are checked by the store, as every field of the body: a bad one is a 400 `invalid_request`.
ERRORS = error_responses({400: ["invalid_json", "invalid_request"], 401: ["unauthorized"]})


def event_schema(event_type: str) -> dict[str, Any]:
    """One event of `event_type` as `events_from_body` and the memory store accept it."""
    required = REQUIRED_FIELDS.get(event_type, ())
    data_fields = {}
    for name, spec in EVENT_FIELDS[event_type].items():
        data_fields[name] = {**DATA_VALUE_SCHEMAS[spec.expected]}
        if name in required:
            data_fields[name]["minLength"] = 1
    data: dict[str, Any] = {"type": "object", "properties": data_fields, "additionalProperties": False}
    if required:
        data["required"] = list(required)
    return {
        "type": "object",
        "properties": {
            "type": {"const": event_type},
            "timestamp": {"anyOf": [TIME, {"type": "null"}], "description": "Absent or null: the time of the append."},
            "data": data,
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": ["type", "data"] if required else ["type"],
        "additionalProperties": False,
    }


APPEND_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {
                    "events": {
                        "type": "array",
                        "items": {"oneOf": [event_schema(event_type) for event_type in EVENT_FIELDS]},
                        "minItems": 1,
                        "maxItems": MAX_EVENTS_PER_APPEND,
                        "description": "At most this many when every event's data is small; "
                        "large data takes more of one transaction.",
                    }
                },
                "required": ["events"],
                "additionalProperties": False,
            }
        }
    },
}


def read_link(**parameters: str) -> dict[str, Any]:
    """A link to the events of the run the request named."""
    run = {"path.agent_id": "$request.path.agent_id", "path.run_id": "$request.path.run_id"}
    return {"operationId": "memory_load", "parameters": {**run, **parameters}}


def register(app: ConcurrentRestResolver, services: Services) -> None:
    memory = services.memory
    settings = services.settings
    authorize = runtime_key.guard(app, settings)

    @app.post(
        EVENTS_PATH,
        summary="Append events to a run's product memory",
        description='Body: `{"events": [{"type", "timestamp"?, "data"?, "labels"?}]}`, all appended or none. '
        f"Types: {', '.join(EVENT_FIELDS)}; `data` holds goa-ai's keys for its type. "
        "A missing `timestamp` (RFC 3339) is the time of the append. Answer: the sequences assigned.",
        tags=["memory"],
        status_code=201,
        operation_id="memory_append",
        responses={
            201: {
                "description": "The events were appended.",
                "content": {"application/json": {"model": MemoryAppendResponse}},
                "links": {"ReadBack": read_link()},
            },
            **ERRORS,
        },
        openapi_extensions={"requestBody": APPEND_BODY},
    )
    def append(agent_id: str, run_id: str) -> Response[str]:
        authorize()
        events = events_from_body(json_body(app.current_event))
        try:
            sequences = memory.append_events(agent_id, run_id, events)
        except MemoryRequestError as error:
            raise InvalidRequest(str(error)) from error
        return json_response(201, {"agent_id": agent_id, "run_id": run_id, "sequences": sequences})

    @app.get(
        EVENTS_PATH,
        summary="Read a run's product memory after a sequence",
        description="Events oldest first; an unknown run has none. Pass `next_cursor` as `after` while `has_more`.",
        tags=["memory"],
        operation_id="memory_load",
        responses={
            200: {
                "description": "A page of the run's events.",
                "content": {"application/json": {"model": MemorySnapshotResponse}},
                "links": {"NextPage": read_link(**{"query.after": "$response.body#/next_cursor"})},
            },
            **ERRORS,
        },
    )
    def load(
        agent_id: str,
        run_id: str,
        after: Annotated[int, Query(ge=0, le=MAX_CURSOR, description="Last sequence already read.")] = 0,
        limit: Annotated[int, Query(ge=1, le=settings.max_page_limit)] = settings.default_page_limit,
    ) -> Response[str]:
        authorize()
        try:
            snapshot = memory.load_run(agent_id, run_id, after=after, limit=limit, max_bytes=settings.max_page_bytes)
        except MemoryRequestError as error:
            raise InvalidRequest(str(error)) from error
        return json_response(200, snapshot_json(snapshot))


def events_from_body(raw: bytes) -> list[MemoryEvent]:
    # Exact numbers need the transcript's reader, which would turn a lone surrogate into U+FFFD
    # and takes any depth its stack allows: both refused first, as on every route.
    jsontext.require_parseable(raw)
    try:
        body = exactjson.loads(raw)
    except exactjson.JsonError as error:
        raise InvalidJson(f"The body is not valid JSON: {error}.") from error
    if not isinstance(body, dict) or set(body) != {"events"} or not isinstance(body["events"], list):
        raise InvalidRequest('The body must be {"events": [...]}.', field="events")
    return [event_from_json(value, f"events[{index}]") for index, value in enumerate(body["events"])]


def event_from_json(value: Any, where: str) -> MemoryEvent:
    if not isinstance(value, dict):
        raise InvalidRequest(f"{where} must be an object.", field=where)
    unknown = sorted(set(value) - set(EVENT_KEYS))
    if unknown:
        raise InvalidRequest(f'{where} has unknown field "{unknown[0]}".', field=where)
    if not isinstance(value.get("type"), str):
        raise InvalidRequest(f"{where}.type must be a string.", field=f"{where}.type")
    timestamp = value.get("timestamp")
    try:
        moment = None if timestamp is None else decode(datetime, timestamp, f"{where}.timestamp")
    except WireError as error:
        raise InvalidRequest(f"{error}.", field=f"{where}.timestamp") from error
    return MemoryEvent(type=value["type"], timestamp=moment, data=value.get("data", {}), labels=value.get("labels", {}))


def snapshot_json(snapshot: MemorySnapshot) -> dict[str, Any]:
    events = [
        {
            "sequence": event.sequence,
            "type": event.type,
            "timestamp": format_time(event.stored_at),
            "data": event.data,
            "labels": event.labels,
        }
        for event in snapshot.events
    ]
    return {"agent_id": snapshot.agent_id, "run_id": snapshot.run_id, "events": events, **snapshot.meta}


def json_response(status: int, body: dict[str, Any]) -> Response[str]:
    """Exact numbers need the transcript's encoder, not the resolver's (hence no return models)."""
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=exactjson.dumps(body, sort_keys=False)
    )
