"""One JSON-RPC message read from what an MCP client sent, or the error that answers it instead.

Both transports read with it (`stateless.py` a POST's body, `stdio.py` a line),
so what one refuses the other refuses too, with the same code and message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_types import INVALID_REQUEST, PARSE_ERROR, JSONRPCMessage, jsonrpc_message_adapter
from pydantic import ValidationError

from cairn import jsontext
from cairn.errors import InvalidJson


@dataclass(frozen=True)
class Refusal:
    """A message that cannot be read: its JSON-RPC error (`id` null, since none could be read) and
    the HTTP status streamable HTTP answers it with."""

    status: int
    code: int
    message: str


def read(raw: bytes) -> JSONRPCMessage | Refusal:
    """The one message in `raw`, or why there is none."""
    if raw and jsontext.holds_more_values(raw.decode("utf-8", "replace"), jsontext.MAX_VALIDATED_VALUES):
        # Validation would name each of its problems, about 1.5 KB of memory apiece.
        too_many = f"The message holds more than {jsontext.MAX_VALIDATED_VALUES:,} JSON values; send less at once."
        return Refusal(413, INVALID_REQUEST, too_many)
    if not raw.strip():
        return Refusal(400, PARSE_ERROR, "The message is empty: send one JSON-RPC message.")
    try:
        payload = jsontext.parse(raw)
    except InvalidJson as error:
        return Refusal(400, PARSE_ERROR, error.message)
    if isinstance(payload, list):
        return Refusal(400, INVALID_REQUEST, "Send one JSON-RPC message at a time; batches are not supported.")
    if isinstance(payload, dict) and "method" in payload and "id" in payload and not _is_request_id(payload["id"]):
        # The mcp package reads it as a notification, which is never answered: the client would
        # wait for its answer in vain.
        return Refusal(400, INVALID_REQUEST, "A request's id is a string or an integer.")
    try:
        return jsonrpc_message_adapter.validate_python(payload)
    except ValidationError:
        return Refusal(400, INVALID_REQUEST, "Not a JSON-RPC 2.0 message.")


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
