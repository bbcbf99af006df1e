"""Product memory over HTTP: a run's ordered events, appended and read back.

Same authorization as the runtime routes (IAM in AWS, the runtime key as a
bearer token under `cairn serve`). Bodies are read and written with exact
numbers, so structured data comes back as it was sent.
"""

from datetime import datetime
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query

from cairn.api import runtime_key
from cairn.api.routes.events import MAX_CURSOR
from cairn.api.routes.inbox import raw_body
from cairn.errors import InvalidJson, InvalidRequest
from cairn.runtime.wire import WireError, decode, format_time
from cairn.services import Services
from cairn.transcript import exactjson
from cairn.transcript.errors import MemoryRequestError
from cairn.transcript.memory import EVENT_FIELDS, MemoryEvent, MemorySnapshot

EVENTS_PATH = "/api/v1/memory/<agent_id>/runs/<run_id>/events"
EVENT_KEYS = ("type", "timestamp", "data", "labels")


def register(app, services: Services) -> None:
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
    )
    def append(agent_id: str, run_id: str):
        authorize()
        events = events_from_body(raw_body(app.current_event))
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
    )
    def load(
        agent_id: str,
        run_id: str,
        after: Annotated[int, Query(ge=0, le=MAX_CURSOR, description="Last sequence already read.")] = 0,
        limit: Annotated[int, Query(ge=1, le=settings.max_page_limit)] = settings.default_page_limit,
    ):
        authorize()
        try:
            snapshot = memory.load_run(agent_id, run_id, after=after, limit=limit, max_bytes=settings.max_page_bytes)
        except MemoryRequestError as error:
            raise InvalidRequest(str(error)) from error
        return json_response(200, snapshot_json(snapshot))


def events_from_body(raw: bytes) -> list[MemoryEvent]:
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
            "timestamp": format_time(event.timestamp),
            "data": event.data,
            "labels": event.labels,
        }
        for event in snapshot.events
    ]
    return {"agent_id": snapshot.agent_id, "run_id": snapshot.run_id, "events": events, **snapshot.meta}


def json_response(status: int, body: dict[str, Any]) -> Response:
    """Exact numbers need the transcript's encoder, not the resolver's (hence no return models)."""
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=exactjson.dumps(body, sort_keys=False)
    )
