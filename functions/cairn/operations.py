"""Every address operation once, with each face it has: REST route, MCP tool, SDK method, CLI command.

The runtime's methods are served from one table (`runtime.methods.METHODS`);
the address operations are written once as use cases and reached through
four faces, each in its own module. This table names them all in one place,
and `tests/unit/test_address_operations.py` holds every face to it: each
address route in OpenAPI, each MCP tool of both tool lists, each SDK method
and each CLI command named here exists, and none exists without its row.
Adding an operation is one row here, its use case and its tests; the check
then lists the faces still missing.

A face left out says why in `Operation.note`. The framework stores'
routes (checkpoints, the LangGraph store, agent and Strands sessions) are
reached through their integration classes instead (`FRAMEWORK_ROUTES`);
files are an address operation of their own, which Strands' `CairnStorage`
also calls through the SDK.
"""

from __future__ import annotations

from dataclasses import dataclass

ADDRESS = "/api/v1/addresses/{address_id}"


@dataclass(frozen=True)
class Operation:
    """One address operation: its route (`METHOD path`) and, where it has them, its other faces.

    `tool`: the MCP tool's name; `sdk`: `Class.method` of `cairn.client`; `cli`: the `cairn` command's
    words after `cairn`.
    """

    name: str
    route: str
    tool: str | None = None
    sdk: str | None = None
    cli: str | None = None
    note: str = ""


OPERATIONS: tuple[Operation, ...] = (
    Operation("provision", "POST /api/v1/addresses", "create_return_address", "Address.provision", "provision"),
    Operation("describe", f"GET {ADDRESS}", sdk="Address.describe", note="metadata for people and tools"),
    Operation("keep_headers", f"PATCH {ADDRESS}", sdk="Address.keep_headers", note="an owner's setting"),
    Operation("delete", f"DELETE {ADDRESS}", sdk="Address.delete", note="the owner's, never an agent's tool"),
    Operation("inbox_settings", f"GET {ADDRESS}/inbox", sdk="Address.inbox_settings", note="an owner's setting"),
    Operation(
        "set_verifier",
        f"PUT {ADDRESS}/inbox/verifiers/{{kind}}",
        sdk="Address.set_verifier",
        note="carries a signing secret, which no tool call should",
    ),
    Operation(
        "remove_verifier",
        f"DELETE {ADDRESS}/inbox/verifiers/{{kind}}",
        sdk="Address.remove_verifier",
        note="an owner's setting",
    ),
    Operation(
        "deliver",
        "POST /api/v1/inbox/{address_id}/{secret}",
        sdk="Inbox.post",
        cli="inbox post",
        note="the inbox URL's holder posts, not the agent's tools",
    ),
    Operation("poll", f"GET {ADDRESS}/events", "poll_events", "Events.poll", "events poll"),
    Operation(
        "acknowledge", f"POST {ADDRESS}/events/{{event_id}}/ack", "acknowledge_event", "Events.ack", "events ack"
    ),
    Operation("trim", f"DELETE {ADDRESS}/events", note="an owner's clean-up over HTTP only"),
    Operation(
        "download",
        f"GET {ADDRESS}/events/{{event_id}}/attachments/{{attachment_id}}",
        sdk="Attachments.download",
        note="bytes, which a tool's JSON answer cannot carry",
    ),
    Operation("list_state", f"GET {ADDRESS}/state", "list_state", "State.keys", "state keys"),
    Operation("state_batch", f"POST {ADDRESS}/state", sdk="State.transaction", note="one tool call writes one key"),
    Operation("get_state", f"GET {ADDRESS}/state/{{key}}", "get_state", "State.get", "state get"),
    Operation("set_state", f"PUT {ADDRESS}/state/{{key}}", "set_state", "State.set", "state set"),
    Operation("delete_state", f"DELETE {ADDRESS}/state/{{key}}", "delete_state", "State.delete", "state delete"),
    Operation("list_contacts", f"GET {ADDRESS}/email/contacts", "list_contacts", "Mailbox.contacts", "mail contacts"),
    Operation(
        "add_contact", f"POST {ADDRESS}/email/contacts", "add_contact", "Mailbox.add_contact", "mail add-contact"
    ),
    Operation(
        "verify_contact",
        f"POST {ADDRESS}/email/contacts",
        "verify_contact",
        "Mailbox.verify_contact",
        "mail verify-contact",
    ),
    Operation(
        "remove_contact",
        f"DELETE {ADDRESS}/email/contacts/{{email}}",
        sdk="Mailbox.remove_contact",
        cli="mail remove-contact",
        note="the owner's",
    ),
    Operation("send_email", f"POST {ADDRESS}/email/send", "send_email", "Mailbox.send", "mail send"),
    Operation("replay_email", f"POST {ADDRESS}/email/replay", note="re-reads stored mail: an operator's repair"),
    Operation(
        "create_subscription",
        f"POST {ADDRESS}/subscriptions",
        "create_subscription",
        "Subscriptions.create",
        "subscriptions create",
    ),
    Operation(
        "list_subscriptions",
        f"GET {ADDRESS}/subscriptions",
        "list_subscriptions",
        "Subscriptions.list",
        "subscriptions list",
    ),
    Operation(
        "read_subscription",
        f"GET {ADDRESS}/subscriptions/{{subscription_id}}",
        sdk="Subscriptions.get",
        note="list_subscriptions answers the same for each",
    ),
    Operation(
        "delete_subscription",
        f"DELETE {ADDRESS}/subscriptions/{{subscription_id}}",
        "delete_subscription",
        "Subscriptions.delete",
        "subscriptions delete",
    ),
    Operation(
        "rotate_subscription_secret",
        f"POST {ADDRESS}/subscriptions/{{subscription_id}}/rotate",
        sdk="Subscriptions.rotate",
        note="answers a signing secret, which no tool result should",
    ),
    Operation(
        "test_subscription",
        f"POST {ADDRESS}/subscriptions/{{subscription_id}}/test",
        sdk="Subscriptions.test",
        note="a person's check of a receiver while setting it up",
    ),
    Operation("write_file", f"POST {ADDRESS}/files", "write_file", "Files.write", "files write"),
    Operation("read_file", f"POST {ADDRESS}/files/read", "read_file", "Files.read", "files read"),
    Operation("list_files", f"POST {ADDRESS}/files/list", "list_files", "Files.list", "files list"),
    Operation("delete_file", f"POST {ADDRESS}/files/delete", "delete_file", "Files.delete", "files delete"),
)

# Route prefixes served through the framework integrations, by the class that calls them.
FRAMEWORK_ROUTES = {
    f"{ADDRESS}/checkpoints": "cairn.integrations.langgraph.CairnSaver",
    f"{ADDRESS}/store": "cairn.integrations.langgraph.CairnStore",
    f"{ADDRESS}/sessions": "cairn.integrations.openai_agents.CairnSession",
    f"{ADDRESS}/strands": "cairn.integrations.strands.CairnSessionRepository",
}
