"""Wire shapes of the agent-session routes, used for validation and OpenAPI."""

from typing import Any

from pydantic import ConfigDict, Field

from cairn.agent_sessions import conversations
from cairn.api.schemas import Schema

Item = dict[str, Any]
# What a client's own id for one add or pop may be (a random hex id fits).
CLIENT_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"


class ItemsAddRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    items: list[Item] = Field(
        min_length=1,
        max_length=conversations.MAX_ITEMS_PER_ADD,
        description="Conversation items (JSON objects, e.g. the OpenAI Agents SDK's input items), in order. "
        f"All are added or none; at most {conversations.MAX_ITEMS_PER_ADD} items and "
        f"{conversations.MAX_ADD_BYTES} bytes as JSON in one add.",
    )
    add_id: str | None = Field(
        default=None,
        pattern=CLIENT_ID_PATTERN,
        description="A random id for this add: sent again after the add committed, it adds nothing.",
    )


class ItemsAddedResponse(Schema):
    session_id: str
    added: int
    count: int = Field(description="Items the session holds once this add committed.")


class ItemsResponse(Schema):
    session_id: str
    items: list[Item] = Field(description="The newest items asked for, oldest first.")
    next: int | None = Field(description="Set when older items remain: send it back as `before`.")


class PoppedResponse(Schema):
    session_id: str
    item: Item | None = Field(description="The newest item, now removed; null when the session was empty.")


class ClearedResponse(Schema):
    session_id: str
    cleared: bool
