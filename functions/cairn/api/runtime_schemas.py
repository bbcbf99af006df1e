"""OpenAPI for the runtime store routes: JSON Schemas of the wire form, links between methods.

The schemas are generated from the same command and result dataclasses that
`cairn.runtime.wire` decodes and encodes, so a field added to a command is
documented without anyone writing it down twice. Generation follows the wire
rules: bytes are standard base64 with padding, times RFC 3339, enums their
values, unknown fields refused. A command's fields with a default are
optional; an answer carries every field. A required time is described as a
time, although the decoder also takes `null` for it (Go's zero time) so that
the store can name the missing time in its answer.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode
from pydantic_core import core_schema

from cairn.api.errors import status_for
from cairn.runtime.errors import SENTINELS
from cairn.runtime.methods import METHODS, Method
from cairn.runtime.wire import TIME_IN_ANSWER_PATTERN

BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
BASE64 = {"type": "string", "contentEncoding": "base64", "pattern": BASE64_PATTERN}
TIME = {"type": "string", "format": "date-time"}
TIME_IN_ANSWER = {**TIME, "pattern": TIME_IN_ANSWER_PATTERN}
ERROR_REF = {"$ref": "#/components/schemas/Error"}


class WireJsonSchema(GenerateJsonSchema):
    """Pydantic's schema of a dataclass, in the form `wire.decode` reads and `wire.encode` writes."""

    def bytes_schema(self, schema: core_schema.BytesSchema) -> dict[str, Any]:
        return dict(BASE64)

    def datetime_schema(self, schema: core_schema.DatetimeSchema) -> dict[str, Any]:
        if self.mode == "serialization":
            return dict(TIME_IN_ANSWER)
        return {
            **TIME,
            "description": "RFC 3339 with a time zone. Run and record times must be whole milliseconds; "
            "session times are kept to the microsecond.",
        }

    def dataclass_schema(self, schema: core_schema.DataclassSchema) -> dict[str, Any]:
        json_schema = super().dataclass_schema(schema)
        json_schema["additionalProperties"] = False
        if self.mode == "serialization":
            # `wire.encode` writes every field, defaults included.
            json_schema["required"] = list(json_schema.get("properties", {}))
            for field in json_schema.get("properties", {}).values():
                field.pop("default", None)
        return json_schema


def wire_schema(kind: type, mode: JsonSchemaMode) -> dict[str, Any]:
    """The self-contained JSON Schema of `kind` on the wire (`validation`: a command, `serialization`: an answer).

    Definitions are inlined: a `$ref` inside an OpenAPI operation resolves against the whole document.
    """
    generated = TypeAdapter(kind).json_schema(mode=mode, schema_generator=WireJsonSchema)
    definitions = generated.pop("$defs", {})
    inlined: dict[str, Any] = _inline(generated, definitions)
    return inlined


def _inline(node: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        reference = node.get("$ref")
        if reference is not None:
            target = _inline(copy.deepcopy(definitions[reference.rsplit("/", 1)[-1]]), definitions)
            return {**target, **{key: _inline(value, definitions) for key, value in node.items() if key != "$ref"}}
        return {key: _inline(value, definitions) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, definitions) for item in node]
    return node


def request_body(method: Method) -> dict[str, Any]:
    """The `requestBody` of a method's route. An empty body reads as `{}`, so it is optional where `{}` will do."""
    schema = wire_schema(method.request, "validation")
    return {"required": bool(schema.get("required")), "content": {"application/json": {"schema": schema}}}


def runtime_error_codes() -> dict[int, list[str]]:
    """The codes a runtime route answers with, by status (422 is described with every route)."""
    codes: dict[int, list[str]] = {400: ["invalid_json", "runtime_error"], 401: ["unauthorized"]}
    for code, kind in SENTINELS.items():
        codes.setdefault(status_for(kind), []).append(code)
    return dict(sorted(codes.items()))


def error_responses(codes_by_status: dict[int, list[str]]) -> dict[int, OpenAPIResponse]:
    """Error answers in the common envelope, each naming the codes it can carry."""
    return {
        status: {
            "description": "Error; `code` is one of " + ", ".join(f"`{code}`" for code in codes) + ".",
            "content": {"application/json": {"schema": ERROR_REF}},
        }
        for status, codes in codes_by_status.items()
    }


# The ids of the run a start command named.
STARTED_RUN = {
    "run_id": "$request.body#/run/run_id",
    "agent_id": "$request.body#/run/agent_id",
    "session_id": "$request.body#/run/session_id",
}


def _run_links(parent_method: str) -> dict[str, dict[str, Any]]:
    """What a client does next with a run it started: read it, log to it, stop it, start its child."""
    run = STARTED_RUN
    run_ref = {"run_id": run["run_id"]}
    record = {"run_id": run["run_id"], "record": run}
    body_by_target: dict[str, dict[str, Any]] = {
        "load_run": run_ref,
        "load_run_suspension": run_ref,
        "list_run_records": run_ref,
        "list_run_transcript_records": run_ref,
        "append_run_record": run,
        "record_run_cancellation": record,
        "record_run_suspension": record,
        "record_run_terminal": record,
        "repair_run_suspension": record,
        "repair_run_terminal": record,
        parent_method: {
            "run": {"parent_run_id": run["run_id"], "session_id": run["session_id"]},
            "parent_linked": run,
        },
    }
    return {_link_name(target): _link(target, body) for target, body in body_by_target.items()}


def _session_links() -> dict[str, dict[str, Any]]:
    """What a client does next with a session it created."""
    session = "$response.body#/id"
    body_by_target: dict[str, Any] = {
        name: {"session_id": session}
        for name in (
            "load_session",
            "load_session_status",
            "end_session",
            "purge_session",
            "list_runs_by_session",
            "list_session_run_records",
        )
    }
    body_by_target["start_root_run"] = {"run": {"session_id": session}, "started": {"session_id": session}}
    body_by_target["start_child_run"] = {"run": {"session_id": session}, "parent_linked": {"session_id": session}}
    return {_link_name(target): _link(target, body) for target, body in body_by_target.items()}


def _link(target: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"operationId": operation_id(target), "requestBody": body}


def _link_name(target: str) -> str:
    return "".join(part.capitalize() for part in target.split("_"))


def operation_id(method_name: str) -> str:
    return f"runtime_{method_name}"


LINKS: dict[str, dict[str, dict[str, Any]]] = {
    "create_session": _session_links(),
    "start_root_run": _run_links("start_child_run"),
    "start_child_run": _run_links("start_child_run"),
    "start_one_shot_run": _run_links("start_one_shot_child_run"),
    "start_one_shot_child_run": _run_links("start_one_shot_child_run"),
}


def responses(method: Method) -> dict[int, OpenAPIResponse]:
    """The success answer (with links to the methods that follow it) and the error answers."""
    success: OpenAPIResponse = {
        "description": f"The JSON form of `{method.result.__name__}`.",
        "content": {"application/json": {"schema": wire_schema(method.result, "serialization")}},
    }
    if method.name in LINKS:
        success["links"] = LINKS[method.name]
    return {200: success, **error_responses(runtime_error_codes())}


def describe_routes(document: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Put each runtime route's request body and answers into a generated OpenAPI document.

    Done when the document is asked for rather than when the routes register:
    generating the schemas takes tens of milliseconds every cold start would
    otherwise pay for a document few requests read.
    """
    for name, (body, answers) in _descriptions().items():
        operation = document["paths"][f"{prefix}/{name}"]["post"]
        operation["requestBody"] = copy.deepcopy(body)
        operation.setdefault("responses", {}).update(copy.deepcopy(answers))
    return document


@cache
def _descriptions() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    return {
        name: (request_body(method), {str(status): answer for status, answer in responses(method).items()})
        for name, method in METHODS.items()
    }
