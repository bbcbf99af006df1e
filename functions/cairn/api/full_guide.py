"""`/llms-full.txt`: the complete guide for agents in one text file.

It is assembled from the sources the other documents come from, so it
cannot drift from them: the agent guide (`skill.md`, rendered for this
deployment: provisioning, trust, feed and state rules, email, examples),
every operation of the OpenAPI document, the error codes with the statuses
`api/errors.py` answers them with, and the deployment's capabilities and
limits (`/.well-known/agentaddress.json`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def render(
    guide: str, openapi: Mapping[str, Any], errors: Sequence[tuple[str, str]], capabilities: Mapping[str, Any]
) -> str:
    sections = [
        guide.rstrip(),
        "# Every route\n\nGenerated from the OpenAPI document; bodies and answers name the schemas listed after.\n\n"
        + "\n\n".join(_operations(openapi)),
        "# Schemas\n\n" + "\n".join(_schemas(openapi)),
        '# Errors\n\nEvery refusal is `{"error": {"code", "message", ...}}` with one of these codes:\n\n'
        + "\n".join(f"- `{code}`: {status}" for code, status in errors),
        "# Limits of this deployment\n\n" + json.dumps(capabilities, indent=2, ensure_ascii=False),
    ]
    return "\n\n".join(sections) + "\n"


def _operations(openapi: Mapping[str, Any]) -> list[str]:
    described = []
    for path, item in openapi.get("paths", {}).items():
        for method in _METHODS:
            operation = item.get(method)
            if operation is not None:
                described.append(_operation(method.upper(), path, operation))
    return described


def _operation(method: str, path: str, operation: Mapping[str, Any]) -> str:
    lines = [f"## {method} {path}"]
    for text in (operation.get("summary"), operation.get("description")):
        if text:
            lines.append(" ".join(str(text).split()))
    for parameter in operation.get("parameters", []):
        required = "required" if parameter.get("required") else "optional"
        description = " ".join(str(parameter.get("description") or "").split())
        suffix = f": {description}" if description else ""
        lines.append(f"- {parameter['in']} `{parameter['name']}` ({required}){suffix}")
    body = operation.get("requestBody", {}).get("content", {})
    for content_type, media in body.items():
        lines.append(f"- body ({content_type}): {_schema_name(media.get('schema', {}))}")
    answers = []
    for status, response in operation.get("responses", {}).items():
        schemas = [_schema_name(media.get("schema", {})) for media in response.get("content", {}).values()]
        answers.append(f"{status} {schemas[0]}" if schemas else str(status))
    if answers:
        lines.append("- answers: " + "; ".join(answers))
    return "\n".join(lines)


def _schemas(openapi: Mapping[str, Any]) -> list[str]:
    """Each component with its fields (`?`: optional) and what their descriptions say."""
    lines = []
    for name, schema in openapi.get("components", {}).get("schemas", {}).items():
        required = set(schema.get("required", []))
        properties = schema.get("properties", {})
        lines.append(f"- {name}" + ("" if properties else f": {_schema_name(schema)}"))
        for field, spec in properties.items():
            description = " ".join(str(spec.get("description") or "").split())
            optional = "" if field in required else "?"
            lines.append(f"  - `{field}`{optional} {_schema_name(spec)}{': ' + description if description else ''}")
    return lines


def _schema_name(schema: Mapping[str, Any]) -> str:
    """A short name for a schema: its component, its type, or its alternatives."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    for combined in ("anyOf", "oneOf"):
        if combined in schema:
            return " | ".join(_schema_name(option) for option in schema[combined])
    if schema.get("type") == "array":
        return f"array of {_schema_name(schema.get('items', {}))}"
    return str(schema.get("type", "any JSON"))
