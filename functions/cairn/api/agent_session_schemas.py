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
    offset: int = Field(
        default=0,
        ge=0,
        le=conversations.MAX_SEQUENCE,
        description="For an add larger than one request holds, sent in parts under one `add_id`: how many of its "
        "items the parts before this one hold.",
    )
    more: bool = Field(
        default=False,
        description="Parts of this add follow. No reader sees any part until the last one (`more` false) "
        "commits every part's items at once; a sender that stops before it leaves nothing to see.",
    )


class ItemsAddedResponse(Schema):
    session_id: str
    added: int
    count: int = Field(
        description="Items the session holds once this add committed (before it, for a part that others follow)."
    )


class ItemsResponse(Schema):
    session_id: str
    items: list[Item] = Field(description="The newest items asked for, oldest first.")
    next: int | None = Field(description="Set when older items remain: send it back as `before`.")
    version: int = Field(
        description="The session's version when read (0: no session yet); every change moves it on. "
        "A replacement may name it, to replace exactly what was read."
    )


class ItemsReplaceRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    items: list[Item] = Field(
        max_length=conversations.MAX_ITEMS_PER_REPLACE,
        description="The items that take the replaced ones' place, in order (none: the replaced ones go): at most "
        f"{conversations.MAX_ITEMS_PER_REPLACE} and {conversations.MAX_ADD_BYTES} bytes as JSON. Replacing every "
        "item with more than one DynamoDB transaction holds writes them in several, which no read sees until "
        "the last makes them the session; meanwhile another such replacement of the session is refused (409 "
        "`session_conflict`, reason `held`).",
    )
    newest: int | None = Field(
        default=None,
        ge=1,
        description="How many of the newest items to replace; absent: every item. Replacing some while "
        "older ones stay takes any number of them, but the new items must fit in one DynamoDB transaction "
        "with the head: 97 (one fewer with a `replace_id`, fewer again for an item over 400 KB, stored in "
        "pieces), else 400 `invalid_request`. Replacing every item has no such bound.",
    )
    version: int | None = Field(
        default=None,
        ge=0,
        description="Replace only while the session is at this version (a read's `version`): otherwise 409 "
        "`session_conflict` with `current_version`, and nothing changes.",
    )
    replace_id: str | None = Field(
        default=None,
        pattern=CLIENT_ID_PATTERN,
        description="A random id for this replacement: sent again after it committed, it changes nothing.",
    )


class ItemsReplacedResponse(Schema):
    session_id: str
    count: int = Field(description="Items the session holds once this replacement committed.")
    version: int = Field(description="The session's version once this replacement committed.")


class PoppedResponse(Schema):
    session_id: str
    item: Item | None = Field(description="The newest item, now removed; null when the session was empty.")


class ClearedResponse(Schema):
    session_id: str
    cleared: bool
