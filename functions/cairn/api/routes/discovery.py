"""Documents that let an agent find its way: guide, OpenAPI, capabilities, health."""

import json
from functools import cache
from importlib import resources
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

import cairn
from cairn.addresses.state import KEY_PATTERN, PER_KEY_OVERHEAD
from cairn.api import full_guide, urls
from cairn.api.errors import documented_codes
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.mcp import PATHS as MCP_PATHS
from cairn.services import Services
from cairn.settings import DAY_SECONDS, Settings

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string", "pattern": "^[a-z][a-z_]*$"}, "message": {"type": "string"}},
            "description": "Further fields name the details of the failure (field, limits, current revision).",
        }
    },
}
ERROR_RESPONSE = {
    "description": "Error: a stable snake_case `code`, a message and details.",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}


@cache
def _template(name: str) -> str:
    return resources.files("cairn.api").joinpath("static", name).read_text()


OUTBOUND_AVAILABLE = (
    "This server sends mail: verify a contact, then send to it (below). "
    "Sends per address per UTC day: {sends}; contacts per address: {contacts}; text up to {text} bytes."
)
OUTBOUND_MISSING = (
    "This server does not send mail: the routes below answer 409 `outbound_not_configured` "
    "(and `GET .../email/contacts` says `outbound_configured: false`)."
)


def outbound_note(settings: Settings, *, configured: bool) -> str:
    """The guide's sentence on whether this deployment sends mail, with its limits."""
    if not configured:
        return OUTBOUND_MISSING
    return OUTBOUND_AVAILABLE.format(
        sends=settings.outbound_max_sends_per_day,
        contacts=settings.outbound_max_contacts,
        text=settings.outbound_max_text_bytes,
    )


def render(name: str, base: str, settings: Settings, *, outbound_configured: bool = False) -> str:
    values = {
        "BASE_URL": base,
        "MAX_EVENTS": settings.max_events,
        "OUTSIDER_EVENTS": settings.max_events - settings.owner_reserved_events,
        "RETENTION_DAYS": round(settings.event_retention_seconds / DAY_SECONDS, 2),
        "MAX_INBOX_BYTES": settings.max_inbox_bytes,
        "POLL_RATE": settings.poll_rate_per_minute,
        "MAX_WAIT": settings.max_wait_seconds,
        "STATE_MAX_KEYS": settings.state_max_keys,
        "STATE_MAX_BYTES": settings.state_max_bytes,
        "MAX_ATTACHMENT_BYTES": settings.email_attachment_max_bytes,
        "EMAIL_SURFACE": settings.email_ingress_surface,
        "OUTBOUND": outbound_note(settings, configured=outbound_configured),
    }
    text = _template(name)
    for placeholder, value in values.items():
        text = text.replace("{{" + placeholder + "}}", str(value))
    return text


def capabilities(settings: Settings, *, outbound_configured: bool = False) -> dict[str, Any]:
    return {
        "service": "cairn",
        "version": cairn.__version__,
        "api": "agentaddress-compatible",
        "capabilities": [
            "addresses",
            "inbox",
            "events",
            "long_poll",
            "acknowledgements",
            "idempotency_keys",
            "state",
            "state_batch",
            "email",
            *(["outbound_email"] if outbound_configured else []),
            "mcp",
        ],
        "limits": {
            "max_events_per_address": settings.max_events,
            "event_retention_seconds": settings.event_retention_seconds,
            "max_inbox_bytes": settings.max_inbox_bytes,
            "max_idempotency_key_length": settings.max_idempotency_key_length,
            "max_wait_seconds": settings.max_wait_seconds,
            "max_page_limit": settings.max_page_limit,
            "create_rate_per_minute_per_ip": settings.create_rate_per_minute,
            "poll_rate_per_minute_per_address": settings.poll_rate_per_minute,
            "max_attachment_bytes": settings.email_attachment_max_bytes,
            "max_stored_bytes_per_address": settings.storage_max_bytes,
            "expires_in_seconds": {
                "min": settings.min_expires_in_seconds,
                "max": settings.max_expires_in_seconds,
                "default": settings.default_expires_in_seconds or None,
            },
        },
        "state": {
            "max_keys": settings.state_max_keys,
            "max_bytes": settings.state_max_bytes,
            "max_batch_operations": settings.state_max_keys,
            "key_pattern": KEY_PATTERN.pattern,
            "accounting": "per key: UTF-8 bytes of the key + UTF-8 bytes of the value as canonical JSON "
            f"(sorted keys, no whitespace) + {PER_KEY_OVERHEAD} bytes of metadata",
        },
        "outbound_email": {
            "configured": outbound_configured,
            "max_sends_per_day": settings.outbound_max_sends_per_day,
            "max_contacts": settings.outbound_max_contacts,
            "max_text_bytes": settings.outbound_max_text_bytes,
            "verifications_per_day": settings.outbound_verifications_per_day,
            "verifications_per_recipient_per_day": settings.outbound_verifications_per_recipient_per_day,
            "feed_slots_per_send": 2,
            "outcome_events": [
                "email.delivered",
                "email.bounced",
                "email.complained",
                "email.failed",
                "email.outcome_unknown",
            ],
        },
    }


def with_error_responses(document: dict[str, Any]) -> dict[str, Any]:
    """Describe the error envelope every REST route answers with, in place of Powertools' `detail` shape.

    The MCP endpoints keep their own: they answer JSON-RPC errors.
    """
    document.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for path, operations in document.get("paths", {}).items():
        if path in MCP_PATHS:
            continue
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            responses["422"] = ERROR_RESPONSE
            responses["default"] = ERROR_RESPONSE
    return document


def register(app: ConcurrentRestResolver, services: Services) -> None:
    settings = services.settings
    outbound = services.outbound_configured

    def base() -> str:
        return urls.base_url(app.current_event, settings.public_base_url)

    def text(body: str, content_type: str) -> Response[str]:
        return Response(status_code=200, content_type=content_type, body=body)

    @app.get("/skill.md", include_in_schema=False)
    def skill() -> Response[str]:
        return text(render("skill.md", base(), settings, outbound_configured=outbound), "text/markdown; charset=utf-8")

    @app.get("/llms.txt", include_in_schema=False)
    def llms() -> Response[str]:
        return text(render("llms.txt", base(), settings), content_types.TEXT_PLAIN)

    @app.get("/.well-known/agentaddress.json", include_in_schema=False)
    def well_known() -> dict[str, Any]:
        return capabilities(settings, outbound_configured=outbound)

    def openapi_document() -> dict[str, Any]:
        # Built only when asked for: the OpenAPI models and the runtime schemas load here, never for an inbox post.
        from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer, Server

        from cairn.api import runtime_schemas
        from cairn.api.routes.runtime import PREFIX as RUNTIME_PREFIX

        document = app.get_openapi_json_schema(
            title="Cairn",
            version=cairn.__version__,
            servers=[Server(url=base())],
            security_schemes={"bearerAuth": HTTPBearer(description="The address's read token.")},
        )
        return with_error_responses(runtime_schemas.describe_routes(json.loads(document), RUNTIME_PREFIX))

    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> Response[str]:
        return text(json.dumps(openapi_document()), content_types.APPLICATION_JSON)

    @app.get("/llms-full.txt", include_in_schema=False)
    def llms_full() -> Response[str]:
        guide = render("skill.md", base(), settings, outbound_configured=outbound)
        offered = capabilities(settings, outbound_configured=outbound)
        document = full_guide.render(guide, openapi_document(), documented_codes(), offered)
        return text(document, content_types.TEXT_PLAIN)

    @app.get("/healthz", include_in_schema=False)
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": cairn.__version__}
