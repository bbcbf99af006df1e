"""Items of Strands sessions: sessions, agent and multi-agent heads, messages (attribute names live here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cairn import jsontext
from cairn.agent_sessions.ports import Claim, StoredRecord
from cairn.checkpoints.models import Owner
from cairn.dynamodb import blobs, keys
from cairn.dynamodb.checkpoint_items import expiry
from cairn.dynamodb.items import get_int, get_n, get_s, key, n, s

Item = dict[str, Any]

VERSION = "version"
MESSAGES = "messages"
WRITER = "writer"
HELD_UNTIL = "held_until"
# A head's state's length in bytes, so that a replacement knows what it frees without reading the state.
DATA_BYTES = "data_bytes"
# The head's version a message's write committed at: a replacement's item differs from the one it replaced.
WRITTEN_AT = "written_at"
# What a row counts against its address's storage limit beyond the JSON it holds: its key and attributes.
ROW_OVERHEAD = 128


def row_bytes(text: str, name: str = "") -> int:
    """What a session's or head's row holding `text` (and its id, `name`) counts against the storage limit."""
    return len(text.encode()) + len(name.encode()) + ROW_OVERHEAD


def message_bytes(text: str) -> int:
    """What a message of `text` counts against the storage limit: its JSON as answered, and its row."""
    return jsontext.sent_size(text) + ROW_OVERHEAD


def session_put(table: str, owner: Owner, session_id: str, text: str) -> Item:
    """The session's record, only where there is none."""
    item = {
        **key(keys.address_pk(owner.address_id), keys.strands_session_sk(session_id)),
        "session_id": s(session_id),
        "data": s(text),
        **expiry(owner),
    }
    return {"Put": {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}


def record_puts(table: str, owner: Owner, session_id: str, kind: str, record_id: str, text: str) -> list[Item]:
    """A new agent or multi-agent head (version 1, no messages, held by no one), then its state's pieces when
    the state is larger than one item holds."""
    state = state_writes(table, owner, session_id, kind, record_id, text)
    item = {
        **key(keys.address_pk(owner.address_id), keys.strands_record_sk(session_id, kind, record_id)),
        "record_id": s(record_id),
        **state.sets,
        VERSION: n(1),
        MESSAGES: n(0),
        **expiry(owner),
    }
    head = {"Put": {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}
    return [head, *state.puts]


@dataclass(frozen=True)
class StateWrites:
    """A head's state as an update writes it: attributes set, the one removed, pieces put beside the head."""

    sets: Item
    removes: str
    puts: list[Item]


def state_writes(table: str, owner: Owner, session_id: str, kind: str, record_id: str, text: str) -> StateWrites:
    """How a head's update replaces its state with `text`: the attributes it sets, those it removes, and the
    pieces it puts (none when the state fits the head)."""
    pk, sk = keys.address_pk(owner.address_id), keys.strands_record_sk(session_id, kind, record_id)
    payload, pieces = blobs.split(pk, sk, text.encode(), text=True, **expiry(owner))
    gone = blobs.PIECES if "data" in payload else "data"
    return StateWrites({**payload, DATA_BYTES: n(len(text.encode()))}, gone, _puts(table, pieces))


def _puts(table: str, items: list[Item]) -> list[Item]:
    return [{"Put": {"TableName": table, "Item": each}} for each in items]


def head_update(
    table: str,
    owner: Owner,
    session_id: str,
    kind: str,
    record_id: str,
    claim: Claim,
    *,
    now: float,
    state: StateWrites | None = None,
    message_condition: str | None = None,
    message_id: int = 0,
) -> Item:
    """The head moved one version on under `claim`, taking the writer's hold; `state` replaces its state (its
    pieces are the transaction's other actions).

    `message_condition` adds a test of the message count against `message_id`: `next` (a new message must be
    the next index, and counts) or `stored` (an updated message must be there).
    """
    names = {"#version": VERSION}
    values: Item = {":seen": n(claim.version), ":next": n(claim.version + 1)}
    sets = ["#version = :next"]
    conditions = ["attribute_exists(pk)", "#version = :seen"]
    if claim.writer is not None:
        names.update({"#writer": WRITER, "#until": HELD_UNTIL})
        values.update({":me": s(claim.writer), ":until": n(int(claim.held_until)), ":now": n(int(now))})
        sets += ["#writer = :me", "#until = :until"]
        conditions.append("(attribute_not_exists(#writer) OR #writer = :me OR #until <= :now)")
    removes = []
    if state is not None:
        for index, (name, value) in enumerate(state.sets.items()):
            names[f"#state{index}"] = name
            values[f":state{index}"] = value
            sets.append(f"#state{index} = :state{index}")
        names["#gone"] = state.removes
        removes.append("#gone")
    if message_condition is not None:
        names["#messages"] = MESSAGES
        values[":index"] = n(message_id)
        if message_condition == "next":
            values[":count"] = n(message_id + 1)
            sets.append("#messages = :count")
            conditions.append("#messages = :index")
        else:
            conditions.append("#messages > :index")
    return {
        "Update": {
            "TableName": table,
            "Key": key(keys.address_pk(owner.address_id), keys.strands_record_sk(session_id, kind, record_id)),
            "UpdateExpression": "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else ""),
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def release_update(table: str, owner: Owner, session_id: str, agent_id: str, writer: str) -> dict[str, Any]:
    """The parameters of an `UpdateItem` that ends `writer`'s hold, only while it is the holder."""
    return {
        "TableName": table,
        "Key": key(keys.address_pk(owner.address_id), keys.strands_record_sk(session_id, "A", agent_id)),
        "UpdateExpression": "REMOVE #writer, #until",
        "ConditionExpression": "#writer = :me",
        "ExpressionAttributeNames": {"#writer": WRITER, "#until": HELD_UNTIL},
        "ExpressionAttributeValues": {":me": s(writer)},
    }


def message_puts(
    table: str, owner: Owner, session_id: str, agent_id: str, message_id: int, text: str, *, version: int
) -> list[Item]:
    """The message's `Put`, then its pieces' when its text is larger than one item holds. `version`: the agent's
    head's once this write commits, which tells this write's item from any other's of the same message."""
    pk = keys.address_pk(owner.address_id)
    sk = keys.strands_message_sk(session_id, agent_id, message_id)
    payload, pieces = blobs.split(pk, sk, text.encode(), text=True, **expiry(owner))
    # Its size as an answer carries it (escaped), which is what a page's budget counts.
    size = jsontext.sent_size(text)
    item = {
        **key(pk, sk),
        "message_id": n(message_id),
        "size": n(size),
        WRITTEN_AT: n(version),
        **payload,
        **expiry(owner),
    }
    return _puts(table, [item, *pieces])


def stale_pieces(table: str, stored: Item, keep: int) -> list[Item]:
    """Deletes of the stored message's or state's pieces past the first `keep` (a replacement's own count)."""
    sk = stored["sk"]["S"]
    count = get_int(stored, blobs.PIECES)
    pk = stored["pk"]["S"]
    return [
        {"Delete": {"TableName": table, "Key": key(pk, keys.payload_chunk_sk(sk, index))}}
        for index in range(keep, count)
    ]


def pieces_in(actions: list[Item]) -> int:
    """How many pieces a message's puts hold (0: it is inline)."""
    return len(actions) - 1


def record_from(item: Item, text: str) -> StoredRecord:
    """The head as its record; `text`, its state as read (from its pieces, when it has them)."""
    return StoredRecord(text or "{}", get_int(item, VERSION), get_int(item, MESSAGES))


def holder(item: Item, *, now: float) -> tuple[str, float] | None:
    """Who holds the head and until when, while the hold is live."""
    writer, until = get_s(item, WRITER), get_n(item, HELD_UNTIL)
    if writer is None or until is None or until <= now:
        return None
    return writer, until


def size_of(item: Item) -> int:
    return get_int(item, "size")


def stored_message_bytes(item: Item) -> int:
    """What a stored message counts against the storage limit (`message_bytes` of its text)."""
    return size_of(item) + ROW_OVERHEAD


def state_bytes(head: Item) -> int:
    """What a head's state counts now; one written before heads kept it counts as nothing."""
    return get_int(head, DATA_BYTES)
