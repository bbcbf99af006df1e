"""Strands' `SessionRepository` on an address's Strands session routes, and the session manager that uses it.

Strands' own file and S3 repositories overwrite whatever is there, so two
runs of one session (a Lambda retry beside the original, a redelivered
queue message) interleave their messages. Here every write names the
version of the agent its run last read and the run itself (`writer`): the
server commits it only while the agent is still at that version and no
other run holds it, and a run holds the agent from its first write until
it releases it (or the hold lapses). The run that comes second is refused
with `SessionConflict` and stores nothing.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from strands.hooks import AfterInvocationEvent, HookOrder, HookRegistry
from strands.session import RepositorySessionManager, SessionRepository
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionAgent, SessionMessage

from cairn import errors
from cairn.client.address import Address
from cairn.client.http import json_body
from cairn.client.paths import segment

if TYPE_CHECKING:
    from strands.multiagent.base import MultiAgentBase
    from strands.types.agent import LocalAgent

# Long enough for a slow model call or tool between two writes of one run; a run that crashed
# frees the session when its hold lapses.
DEFAULT_HOLD_SECONDS = 600


class SessionConflict(errors.SessionConflict, SessionException):
    """This run no longer has the session to itself: nothing of this write was stored.

    `details["reason"]`: `moved` (another run wrote since this one read), `held` (another run is
    writing it, until `details["held_until"]`) or `exists`. Both `except SessionException` and
    `except cairn.errors.SessionConflict` catch it.
    """


class StorageLimitExceeded(errors.StorageLimitExceeded, SessionException):
    """The write would take the address past the bytes it may store: nothing of it was stored.

    `details` say how many it may store (`max_bytes`), stores (`used_bytes`) and this write needed
    (`needed_bytes`). Both `except SessionException` and `except cairn.errors.StorageLimitExceeded`
    catch it.
    """


class CairnSessionRepository(SessionRepository):
    """Strands sessions kept in a Cairn address, written by one run (`writer`).

    It remembers the version of each agent it read or wrote, and names it in
    its next write. Use one repository per session manager: two managers
    sharing one would be one writer to the server.
    """

    def __init__(self, address: Address, *, writer: str | None = None, hold_seconds: int = DEFAULT_HOLD_SECONDS):
        self.address = address
        self.writer = writer or uuid.uuid4().hex
        self.hold_seconds = hold_seconds
        self._versions: dict[tuple[str, str, str], int] = {}
        self._holding: set[tuple[str, str]] = set()

    # -- sessions --------------------------------------------------------------

    def create_session(self, session: Session, **kwargs: Any) -> Session:
        self._call("PUT", self._url(session.session_id), {"session": session.to_dict()})
        return session

    def read_session(self, session_id: str, **kwargs: Any) -> Session | None:
        found = self._call("GET", self._url(session_id))["session"]
        return None if found is None else Session.from_dict(found)

    # -- agents ----------------------------------------------------------------

    def create_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        self._create(session_id, "agents", session_agent.agent_id, session_agent.to_dict())

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> SessionAgent | None:
        found = self._read(session_id, "agents", agent_id)
        return None if found is None else SessionAgent.from_dict(found)

    def update_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        url = self._url(session_id, "agents", session_agent.agent_id)
        self._write("PUT", url, session_id, "agents", session_agent.agent_id, {"value": session_agent.to_dict()})

    # -- messages --------------------------------------------------------------

    def create_message(self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any) -> None:
        url = self._url(session_id, "agents", agent_id, "messages")
        self._write("POST", url, session_id, "agents", agent_id, {"message": session_message.to_dict()})

    def read_message(self, session_id: str, agent_id: str, message_id: int, **kwargs: Any) -> SessionMessage | None:
        found = self.list_messages(session_id, agent_id, limit=1, offset=message_id)
        return found[0] if found and found[0].message_id == message_id else None

    def update_message(self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any) -> None:
        url = self._url(session_id, "agents", agent_id, "messages", str(session_message.message_id))
        self._write("PUT", url, session_id, "agents", agent_id, {"message": session_message.to_dict()})

    def list_messages(
        self, session_id: str, agent_id: str, limit: int | None = None, offset: int = 0, **kwargs: Any
    ) -> list[SessionMessage]:
        """Messages from index `offset` on, at most `limit`: pages of one range read each."""
        found: list[dict[str, Any]] = []
        following: int | None = offset
        while following is not None and (limit is None or len(found) < limit):
            params: dict[str, Any] = {"offset": following}
            if limit is not None:
                params["limit"] = limit - len(found)
            page = self._call("GET", self._url(session_id, "agents", agent_id, "messages"), params=params)
            found += page["messages"]
            following = page["next"]
        return [SessionMessage.from_dict(message) for message in found]

    # -- multi-agents ----------------------------------------------------------

    def create_multi_agent(self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any) -> None:
        self._create(session_id, "multi_agents", multi_agent.id, multi_agent.serialize_state())

    def read_multi_agent(self, session_id: str, multi_agent_id: str, **kwargs: Any) -> dict[str, Any] | None:
        return self._read(session_id, "multi_agents", multi_agent_id)

    def update_multi_agent(self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any) -> None:
        url = self._url(session_id, "multi_agents", multi_agent.id)
        self._write("PUT", url, session_id, "multi_agents", multi_agent.id, {"value": multi_agent.serialize_state()})

    # -- holds -----------------------------------------------------------------

    def release(self, session_id: str, agent_id: str) -> None:
        """End this writer's hold on the agent, so another run may write it now rather than when it lapses."""
        if (session_id, agent_id) in self._holding:
            self._call("POST", self._url(session_id, "agents", agent_id, "release"), {"writer": self.writer})
            self._holding.discard((session_id, agent_id))

    # -- the wire --------------------------------------------------------------

    def _create(self, session_id: str, kind: str, record_id: str, value: dict[str, Any]) -> None:
        self._call("POST", self._url(session_id, kind, record_id), {"value": value})
        self._versions[(kind, session_id, record_id)] = 1

    def _read(self, session_id: str, kind: str, record_id: str) -> dict[str, Any] | None:
        found = self._call("GET", self._url(session_id, kind, record_id))
        if found["value"] is None:
            return None
        self._versions[(kind, session_id, record_id)] = found["version"]
        value: dict[str, Any] = found["value"]
        return value

    def _write(self, method: str, url: str, session_id: str, kind: str, record_id: str, body: dict[str, Any]) -> None:
        """A write under the version this repository last saw; agents' writes also take this writer's hold."""
        version = self._versions.get((kind, session_id, record_id))
        if version is None:
            raise SessionException(f"Read or create {kind} {record_id!r} before writing it: its version is unknown.")
        claim: dict[str, Any] = {"if_version": version, "hold_seconds": self.hold_seconds}
        if kind == "agents":
            claim["writer"] = self.writer
        answer = self._call(method, url, {**body, **claim})
        self._versions[(kind, session_id, record_id)] = answer["version"]
        if kind == "agents":
            self._holding.add((session_id, record_id))

    def _url(self, session_id: str, *parts: str) -> str:
        return "/".join(
            [f"{self.address.address_url}/strands", *(segment(part, "id") for part in (session_id, *parts))]
        )

    def _call(
        self, method: str, url: str, body: dict[str, Any] | None = None, *, params: dict[str, Any] | None = None
    ) -> Any:
        payload = None if body is None else json_body(body)
        try:
            answer = self.address.http.request(method, url, token=self.address.read_token, body=payload, params=params)
        except errors.SessionConflict as conflict:
            raise SessionConflict(conflict.message, **conflict.details) from conflict
        except errors.StorageLimitExceeded as full:
            raise StorageLimitExceeded(full.message, **full.details) from full
        return answer.json()


class CairnSessionManager(RepositorySessionManager):
    """Strands' `RepositorySessionManager` on a Cairn address: pass it as `Agent(session_manager=...)`.

    One manager is one run's writer: it holds the agent from its first write of an invocation until the
    invocation ends, when it releases it. A run that overlaps another on the same session gets
    `SessionConflict` from the agent call, and nothing of it is stored.
    """

    def __init__(
        self, session_id: str, address: Address, *, hold_seconds: int = DEFAULT_HOLD_SECONDS, **kwargs: Any
    ) -> None:
        self.repository = CairnSessionRepository(address, hold_seconds=hold_seconds)
        super().__init__(session_id, self.repository, **kwargs)

    @classmethod
    def connect(
        cls, base_url: str, address_id: str, read_token: str, session_id: str, **kwargs: Any
    ) -> CairnSessionManager:
        """A manager of the session of the address known by id and read token."""
        return cls(session_id, Address.connect(base_url, address_id, read_token), **kwargs)

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        super().register_hooks(registry, **kwargs)
        # Last of the invocation's end, after the manager's own sync of the agent.
        registry.add_callback(AfterInvocationEvent, self._released, order=HookOrder.SDK_LAST)

    def initialize(self, agent: LocalAgent, **kwargs: Any) -> None:
        super().initialize(agent, **kwargs)
        # A new agent's first messages were written here, outside any invocation: nothing else releases them.
        self.repository.release(self.session_id, agent.agent_id)

    def _released(self, event: AfterInvocationEvent) -> None:
        self.repository.release(self.session_id, event.agent.agent_id)
