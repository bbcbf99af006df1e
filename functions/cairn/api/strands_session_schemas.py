"""Wire shapes of the Strands session routes, used for validation and OpenAPI."""

from typing import Any

from pydantic import ConfigDict, Field

from cairn.agent_sessions import strands
from cairn.api.schemas import Schema

Value = dict[str, Any]
_WRITER = r"^[A-Za-z0-9_-]{1,64}$"


class _Request(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class SessionCreateRequest(_Request):
    session: Value = Field(description="The session as Strands serializes it (`Session.to_dict()`).")


class SessionCreatedResponse(Schema):
    session_id: str
    created: bool


class SessionResponse(Schema):
    session_id: str
    session: Value | None = Field(description="The session as created; null when there is none.")


class RecordCreateRequest(_Request):
    value: Value = Field(
        description="An agent (`SessionAgent.to_dict()`) or a multi-agent's serialized state, "
        f"at most {strands.MAX_STATE_BYTES} bytes as JSON."
    )


class _Claimed(_Request):
    if_version: int = Field(ge=1, le=10**15, description="The version this run last read or wrote.")
    writer: str | None = Field(
        default=None,
        pattern=_WRITER,
        description="The run writing: it holds the agent until it releases it or its hold lapses, and every other "
        "run's write is refused meanwhile. Without one, only the version is checked.",
    )
    hold_seconds: int = Field(default=600, ge=1, le=strands.MAX_HOLD_SECONDS, description="How long the hold lasts.")


class RecordUpdateRequest(_Claimed):
    value: Value = Field(description=f"The new agent or multi-agent state, at most {strands.MAX_STATE_BYTES} bytes.")


class MessageWriteRequest(_Claimed):
    message: Value = Field(
        description="A message as Strands serializes it (`SessionMessage.to_dict()`), with its `message_id`: a new "
        f"one must be the agent's next index. At most {strands.MAX_MESSAGE_BYTES} bytes as JSON."
    )


class ReleaseRequest(_Request):
    writer: str = Field(pattern=_WRITER, description="The run whose hold ends.")


class RecordResponse(Schema):
    session_id: str
    record_id: str
    value: Value | None = Field(description="The stored state; null when there is none.")
    version: int = Field(description="The version to name in the next write (0 when there is none).")
    messages: int = Field(description="How many messages an agent has.")


class WrittenResponse(Schema):
    session_id: str
    record_id: str
    version: int = Field(description="The version after this write, to name in the next.")


class MessagesResponse(Schema):
    session_id: str
    record_id: str
    messages: list[Value] = Field(description="Messages from `offset` on, in index order.")
    next: int | None = Field(description="Set when more remain: send it back as `offset`.")


class ReleasedResponse(Schema):
    session_id: str
    record_id: str
    released: bool = Field(description="False when the writer held nothing (never, or its hold was taken over).")
