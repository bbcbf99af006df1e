"""MCP over streamable HTTP: stateless, one JSON answer per POST.

`/mcp` offers Cairn's tools; `/api/mcp`, where AgentAddress serves MCP,
offers AgentAddress's three with their inputs, so its clients and examples
work unchanged. The tools run on this process's use cases, so they share the
REST routes' rules, limits and poll rate, and answer with the same JSON.
Clients reach them with no credential; each tool but create_return_address
takes the address's read token as an argument. A `poll_events` with `wait`
holds its request as a long-poll does, so in AWS an endpoint whose toolset
takes `wait` (`/mcp`) runs in the streaming function, as the feed's reads do
(`MCP_PATH` in the stack's `infra/api.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from cairn.addresses.state import StateOperation
from cairn.api import presenters, subscription_presenters, urls
from cairn.api.errors import error_response
from cairn.api.file_schemas import FileDeletedResponse, FileListResponse, FileOut
from cairn.api.requests import client_ip, client_network, raw_body
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.subscription_schemas import SubscriptionCreateRequest, SubscriptionDeletedResponse
from cairn.files import files
from cairn.services import Services
from cairn.wakeups.models import Target, TargetKind

if TYPE_CHECKING:
    from cairn.mcp import tools


@dataclass(frozen=True)
class Endpoint:
    path: str
    # Picks the toolset from `cairn.mcp.tools`, which loads on the first MCP request.
    toolset: Callable[[ModuleType], tools.Toolset]
    tools_offered: str


ENDPOINTS = (
    Endpoint(
        "/mcp",
        lambda module: module.CAIRN,
        "create_return_address, poll_events, acknowledge_event, get_state, set_state, delete_state, list_state, "
        "list_contacts, add_contact, verify_contact, send_email, "
        "create_subscription, list_subscriptions, delete_subscription, "
        "write_file, read_file, list_files, delete_file",
    ),
    Endpoint(
        "/api/mcp",
        lambda module: module.AGENTADDRESS,
        "AgentAddress's create_return_address, poll_events (answers at once: no `wait`) and acknowledge_event",
    ),
)
PATHS = frozenset(endpoint.path for endpoint in ENDPOINTS)
# What a GET of an MCP endpoint always answers.
NO_STREAM: dict[int, OpenAPIResponse] = {
    405: {
        "description": "Always: POST one JSON-RPC message per request.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
}


class ServiceOperations:
    """The tools' operations on the use cases, for one request (its base URL and client)."""

    def __init__(
        self,
        services: Services,
        *,
        base_url: str,
        client_ip: str,
        client_network: str | None = None,
        origins: Sequence[str] = (),
    ) -> None:
        self._services = services
        self._base_url = base_url
        self._client_ip = client_ip
        # What the client's held reads count under (`client_network`); None: not counted.
        self._client_network = client_network
        # Where the request reached this service: no webhook may lead back to it.
        self._origins = origins

    def create_return_address(self, arguments: tools.CreateReturnAddress) -> Mapping[str, Any]:
        created = self._services.provisioning.provision(
            client_ip=self._client_ip,
            task_id=arguments.task_id,
            name=arguments.name,
            expires_in_seconds=arguments.expires_in_seconds,
        )
        return _json(presenters.provisioned(created, self._base_url))

    def poll_events(self, arguments: tools.PollEvents) -> Mapping[str, Any]:
        settings = self._services.settings
        limit = min(arguments.limit or settings.default_page_limit, settings.max_page_limit)
        page = self._services.feed.poll(
            arguments.address_id,
            arguments.read_token,
            after=arguments.after,
            wait=arguments.wait,
            limit=limit,
            copies=3,  # a tool result holds the page, then its JSON text in a string: up to twice again
            client=self._client_network,
        )
        return _json(presenters.feed(page, arguments.after))

    def acknowledge_event(self, arguments: tools.AcknowledgeEvent) -> Mapping[str, Any]:
        event = self._services.feed.acknowledge(arguments.address_id, arguments.read_token, arguments.event_id)
        return _json(presenters.acknowledged(event))

    def get_state(self, arguments: tools.StateKeyArguments) -> Mapping[str, Any]:
        entry = self._services.state.get(arguments.address_id, arguments.read_token, arguments.key)
        return _json(presenters.state_value(entry))

    def set_state(self, arguments: tools.SetState) -> Mapping[str, Any]:
        operation = StateOperation(arguments.key, "set", value=arguments.value, if_revision=arguments.if_revision)
        (write,) = self._services.state.apply(arguments.address_id, arguments.read_token, [operation])
        return _json(presenters.state_value(write))

    def delete_state(self, arguments: tools.DeleteState) -> Mapping[str, Any]:
        operation = StateOperation(arguments.key, "delete", if_revision=arguments.if_revision)
        (write,) = self._services.state.apply(arguments.address_id, arguments.read_token, [operation])
        return _json(presenters.state_deletion(write))

    def list_state(self, arguments: tools.AddressArguments) -> Mapping[str, Any]:
        entries, usage = self._services.state.list_keys(arguments.address_id, arguments.read_token)
        return _json(presenters.state_listing(entries, usage, self._services.settings))

    def create_subscription(self, arguments: tools.CreateSubscription) -> Mapping[str, Any]:
        target = SubscriptionCreateRequest.model_validate({"target": arguments.target}).target
        created = self._services.subscriptions.create(
            arguments.address_id,
            arguments.read_token,
            Target(TargetKind(target.kind), target.model_dump(exclude={"kind"}, exclude_none=True)),
            types=arguments.types or (),
            description=arguments.description,
            origins=self._origins,
        )
        return _json(subscription_presenters.created(created))

    def list_subscriptions(self, arguments: tools.AddressArguments) -> Mapping[str, Any]:
        found = self._services.subscriptions.list(arguments.address_id, arguments.read_token)
        return _json(subscription_presenters.listing(found))

    def delete_subscription(self, arguments: tools.SubscriptionArguments) -> Mapping[str, Any]:
        self._services.subscriptions.delete(arguments.address_id, arguments.read_token, arguments.subscription_id)
        return _json(SubscriptionDeletedResponse(subscription_id=arguments.subscription_id, deleted=True))

    def list_contacts(self, arguments: tools.AddressArguments) -> Mapping[str, Any]:
        contacts = self._services.contacts
        found = contacts.list(arguments.address_id, arguments.read_token)
        return _json(presenters.contacts(found, configured=contacts.configured))

    def add_contact(self, arguments: tools.ContactArguments) -> Mapping[str, Any]:
        change = self._services.contacts.request_code(arguments.address_id, arguments.read_token, arguments.email)
        return _json(presenters.contact_change(change))

    def verify_contact(self, arguments: tools.VerifyContact) -> Mapping[str, Any]:
        change = self._services.contacts.verification(
            arguments.address_id, arguments.read_token, arguments.email, arguments.code
        )
        return _json(presenters.contact_change(change))

    def send_email(self, arguments: tools.SendEmail) -> Mapping[str, Any]:
        message = arguments.model_dump(include={"to", "subject", "text", "reply_to_event_id"}, exclude_none=True)
        result = self._services.sending.send(
            arguments.address_id, arguments.read_token, arguments.idempotency_key, message
        )
        return _json(presenters.sent(result))

    def write_file(self, arguments: tools.WriteFile) -> Mapping[str, Any]:
        data = arguments.content()
        self._services.files.write(arguments.address_id, arguments.read_token, arguments.key, data)
        return _json(FileOut(key=arguments.key, size=len(data)))

    def read_file(self, arguments: tools.FileKeyArguments) -> Mapping[str, Any]:
        from cairn.mcp.tools import file_answer  # loaded already: the call came through it

        data = self._services.files.read(arguments.address_id, arguments.read_token, arguments.key)
        return file_answer(arguments.key, data)

    def list_files(self, arguments: tools.ListFiles) -> Mapping[str, Any]:
        page = self._services.files.list(
            arguments.address_id,
            arguments.read_token,
            arguments.prefix,
            after=arguments.after,
            limit=arguments.limit or files.MAX_LIST,
        )
        return _json(FileListResponse(keys=list(page.keys), next=page.next))

    def delete_file(self, arguments: tools.FileKeyArguments) -> Mapping[str, Any]:
        deleted = self._services.files.delete(arguments.address_id, arguments.read_token, arguments.key)
        return _json(FileDeletedResponse(key=arguments.key, deleted=deleted))


def _json(answer: BaseModel) -> Mapping[str, Any]:
    """A tool's result is the JSON body the REST route answers with."""
    return answer.model_dump(mode="json")


def register(app: ConcurrentRestResolver, services: Services) -> None:
    for endpoint in ENDPOINTS:
        _register(app, services, endpoint)


def _register(app: ConcurrentRestResolver, services: Services, endpoint: Endpoint) -> None:
    settings = services.settings

    @app.post(
        endpoint.path,
        summary="Model Context Protocol (streamable HTTP, stateless)",
        description="One JSON-RPC message per POST, answered as application/json: initialize, ping, tools/list, "
        f"tools/call. Tools: {endpoint.tools_offered}. Notifications get 202 and no body.",
        tags=["mcp"],
        # JSON-RPC bodies are checked by the MCP wire types, not by the OpenAPI layer.
        enable_validation=False,
    )
    def mcp() -> Response[str]:
        # The MCP wire types take about 0.4 s to import: only containers that serve MCP pay for them.
        from cairn.mcp import stateless, tools

        event = app.current_event
        operations = ServiceOperations(
            services,
            base_url=urls.base_url(event, settings.public_base_url),
            client_ip=client_ip(event),
            client_network=client_network(event),
            origins=urls.request_origins(event, settings.region),
        )
        toolset = endpoint.toolset(tools)
        reply = stateless.answer(raw_body(event), event.headers.get("mcp-protocol-version"), operations, toolset)
        if reply.message is None:
            return Response(status_code=reply.status)
        return Response(
            status_code=reply.status,
            content_type=content_types.APPLICATION_JSON,
            body=json.dumps(reply.message, ensure_ascii=False),
        )

    # A stateless endpoint offers no stream (GET) and has no session to end (DELETE).
    for register, summary in (
        (app.get, "No server-to-client stream: this MCP endpoint is stateless"),
        (app.delete, "No session to end: this MCP endpoint is stateless"),
    ):
        register(
            endpoint.path, summary=summary, tags=["mcp"], status_code=405, responses=NO_STREAM, enable_validation=False
        )(mcp_stream)


def mcp_stream() -> Response[str]:
    """405: POST one JSON-RPC message per request; this endpoint offers no stream and keeps no session."""
    return error_response(
        405,
        "method_not_allowed",
        "POST one JSON-RPC message per request; this MCP endpoint keeps no session and offers no stream.",
        {"Allow": "POST"},
    )
