"""Strands sessions of an address (its read token): what Strands' `SessionRepository` stores, runs kept apart.

A session holds agents and multi-agents. An agent holds its state (one JSON
object) and its messages, numbered from 0. Every write to an agent names the
version its run last saw and the run making it (`writer`): it commits only
while the agent is still at that version and no other run holds it, and it
holds the agent for `hold_seconds` more (until the run releases it). So of
two runs that overlap on one session, the one that writes second is refused
with `SessionConflict` and nothing of it is stored: the conversation stays
one run's turns after another's, never two runs' turns mixed.
"""

from __future__ import annotations

import json
from typing import Any

from cairn import jsontext
from cairn.addresses.ports import AddressStore
from cairn.agent_sessions.conversations import ANSWER_BUDGET, SESSION_ID
from cairn.agent_sessions.ports import Claim, StoredRecord, StrandsSessionStore
from cairn.checkpoints.models import Owner, owner_of
from cairn.clock import Clock
from cairn.errors import InvalidRequest, PayloadTooLarge

# Record kinds as the routes name them, and as the store keys them.
KINDS = {"agents": "A", "multi_agents": "X"}
# A session's record is one DynamoDB item; an agent's or multi-agent's state and a message may be split into
# pieces, within one transaction (4 MB with the head's update): a multi-agent's state holds its nodes' results.
MAX_SESSION_BYTES = 350_000
MAX_MESSAGE_BYTES = 3_500_000
MAX_STATE_BYTES = MAX_MESSAGE_BYTES
MAX_PAGE_MESSAGES = 1000
# A run's hold outlasts a slow model call or tool; one that crashed frees the session when it lapses.
MAX_HOLD_SECONDS = 3600


class StrandsSessions:
    def __init__(self, addresses: AddressStore, store: StrandsSessionStore, clock: Clock) -> None:
        self._addresses = addresses
        self._store = store
        self._clock = clock

    def _owner(self, address_id: str, read_token: str | None, *ids: str) -> Owner:
        for each in ids:
            _check_id(each)
        return owner_of(self._addresses, address_id, read_token, now=self._clock())

    def create_session(self, address_id: str, read_token: str | None, session_id: str, session: dict[str, Any]) -> None:
        owner = self._owner(address_id, read_token, session_id)
        self._store.create_session(owner, session_id, _text(session, MAX_SESSION_BYTES), now=self._clock())

    def session(self, address_id: str, read_token: str | None, session_id: str) -> dict[str, Any] | None:
        self._owner(address_id, read_token, session_id)
        text = self._store.read_session(address_id, session_id)
        return None if text is None else dict(json.loads(text))

    def create_record(
        self, address_id: str, read_token: str | None, session_id: str, kind: str, record_id: str, value: dict[str, Any]
    ) -> None:
        owner = self._owner(address_id, read_token, session_id, record_id)
        text = _text(value, MAX_STATE_BYTES)
        self._store.create_record(owner, session_id, KINDS[kind], record_id, text, now=self._clock())

    def record(
        self, address_id: str, read_token: str | None, session_id: str, kind: str, record_id: str
    ) -> StoredRecord | None:
        self._owner(address_id, read_token, session_id, record_id)
        return self._store.read_record(address_id, session_id, KINDS[kind], record_id)

    def update_record(
        self,
        address_id: str,
        read_token: str | None,
        session_id: str,
        kind: str,
        record_id: str,
        value: dict[str, Any],
        claim: Claim,
    ) -> int:
        owner = self._owner(address_id, read_token, session_id, record_id)
        text = _text(value, MAX_STATE_BYTES)
        return self._store.update_record(owner, session_id, KINDS[kind], record_id, text, claim, now=self._clock())

    def create_message(
        self,
        address_id: str,
        read_token: str | None,
        session_id: str,
        agent_id: str,
        message: dict[str, Any],
        claim: Claim,
    ) -> int:
        owner = self._owner(address_id, read_token, session_id, agent_id)
        text = _text(message, MAX_MESSAGE_BYTES)
        index = _message_id(message)
        return self._store.create_message(owner, session_id, agent_id, index, text, claim, now=self._clock())

    def update_message(
        self,
        address_id: str,
        read_token: str | None,
        session_id: str,
        agent_id: str,
        message_id: int,
        message: dict[str, Any],
        claim: Claim,
    ) -> int:
        owner = self._owner(address_id, read_token, session_id, agent_id)
        text = _text(message, MAX_MESSAGE_BYTES)
        if _message_id(message) != message_id:
            raise InvalidRequest("The message's `message_id` must be the one in the path.", field="message_id")
        return self._store.update_message(owner, session_id, agent_id, message_id, text, claim, now=self._clock())

    def messages(
        self, address_id: str, read_token: str | None, session_id: str, agent_id: str, *, offset: int, limit: int | None
    ) -> tuple[list[dict[str, Any]], int | None]:
        """Messages from index `offset` on (at most `limit`), and the offset to go on from when more remain."""
        self._owner(address_id, read_token, session_id, agent_id)
        wanted = MAX_PAGE_MESSAGES if limit is None else min(limit, MAX_PAGE_MESSAGES)
        if wanted == 0:
            return [], None
        page = self._store.messages(
            address_id, session_id, agent_id, offset=offset, limit=wanted, max_bytes=ANSWER_BUDGET
        )
        return [json.loads(text) for text in page.messages], page.next

    def release(self, address_id: str, read_token: str | None, session_id: str, agent_id: str, writer: str) -> bool:
        owner = self._owner(address_id, read_token, session_id, agent_id)
        return self._store.release(owner, session_id, agent_id, writer, now=self._clock())

    def claim(self, version: int, writer: str | None, hold_seconds: int) -> Claim:
        """The claim of a write made now: held for `hold_seconds` from this moment."""
        return Claim(version, writer, self._clock() + hold_seconds)


def _check_id(value: str) -> None:
    if not SESSION_ID.fullmatch(value):
        raise InvalidRequest("A session, agent or multi-agent id is 1 to 256 letters, digits or . _ : @ ~ + = -.")


def _text(value: dict[str, Any], limit: int) -> str:
    text = jsontext.canonical(value)
    if len(text.encode()) > limit or jsontext.sent_size(text) > ANSWER_BUDGET:
        raise PayloadTooLarge(f"At most {limit} bytes of JSON here.", max_bytes=limit)
    return text


def _message_id(message: dict[str, Any]) -> int:
    index = message.get("message_id")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 10**12:
        raise InvalidRequest("A message needs its `message_id`, a whole number from 0.", field="message_id")
    return index
