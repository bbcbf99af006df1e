"""Runtime sessions, runs, records, pointers and checkpoints as items, and back.

The only place that knows the attribute names of these items (see `keys`
for where they sit). Payloads (record payloads, checkpoint data) are split
by `blobs`; reading them back needs the table, so the backend does it and
hands the bytes in.
"""

from __future__ import annotations

import json
from typing import Any

from cairn.dynamodb import blobs, keys
from cairn.dynamodb.items import b, from_ms, get_int, get_s, key, n, optional_from_ms, optional_to_ms, s, to_ms
from cairn.runtime import wire
from cairn.runtime.model import (
    HistoryPrefix,
    LiteralPart,
    PreparationOperation,
    RunMeta,
    RunRecord,
    RunStartOutcome,
    RunStatus,
    RunSuspension,
    SeedDeclaration,
    SeedKind,
    SeedRecord,
)
from cairn.runtime.state import Pointer, PublishedSeed, RunState, SeedAttempt, SeedHead, SessionState

Item = dict[str, Any]


def session_item(session: SessionState) -> Item:
    return {
        **key(keys.session_pk(session.id), keys.META),
        "status": s(session.status),
        "created_at": n(to_ms(session.created_at)),
        "ended_at": n(optional_to_ms(session.ended_at)),
        "list_seq": n(session.list_seq),
        "running_runs": n(session.running_runs),
    }


def session_from_item(session_id: str, item: Item) -> SessionState:
    return SessionState(
        id=session_id,
        status=get_s(item, "status") or "",
        created_at=from_ms(get_int(item, "created_at")),
        ended_at=optional_from_ms(get_int(item, "ended_at")),
        list_seq=get_int(item, "list_seq"),
        running_runs=get_int(item, "running_runs"),
        version=get_int(item, "version"),
    )


_RUN_STRINGS = (
    "predecessor_run_id",
    "start_key",
    "parent_link_key",
    "cancellation_key",
    "suspension_key",
    "terminal_key",
)


def run_item(run: RunState) -> Item:
    meta = run.meta
    item = {
        **key(keys.run_pk(meta.run_id), keys.META),
        "agent_id": s(meta.agent_id),
        "run_id": s(meta.run_id),
        "status": s(meta.status),
        "start_outcome": s(meta.start_outcome),
        "started_at": n(to_ms(meta.started_at)),
        "updated_at": n(to_ms(meta.updated_at)),
        "seed_end_id": s(meta.seed_end_id),
        "session_id": s(meta.session_id),
        "parent_run_id": s(meta.parent_run_id),
        "successor_run_id": s(meta.successor_run_id),
        "labels": s(json.dumps(meta.labels, sort_keys=True)),
        "cancellation_reason": s(meta.cancellation_reason),
        "owner_kind": n(run.owner_kind),
        "request_digest": b(run.request_digest or b"\0"),
        "next_seq": n(run.next_seq),
    }
    item.update({name: s(getattr(run, name)) for name in _RUN_STRINGS})
    return item


def run_from_item(item: Item) -> RunState:
    digest = bytes(item["request_digest"]["B"])
    return RunState(
        meta=RunMeta(
            agent_id=get_s(item, "agent_id") or "",
            run_id=get_s(item, "run_id") or "",
            status=RunStatus(get_s(item, "status") or ""),
            start_outcome=RunStartOutcome(get_s(item, "start_outcome") or ""),
            started_at=from_ms(get_int(item, "started_at")),
            updated_at=from_ms(get_int(item, "updated_at")),
            seed_end_id=get_s(item, "seed_end_id") or "",
            session_id=get_s(item, "session_id") or "",
            parent_run_id=get_s(item, "parent_run_id") or "",
            successor_run_id=get_s(item, "successor_run_id") or "",
            labels=json.loads(get_s(item, "labels") or "{}"),
            cancellation_reason=get_s(item, "cancellation_reason") or "",
        ),
        owner_kind=get_int(item, "owner_kind"),
        request_digest=b"" if digest == b"\0" else digest,
        next_seq=get_int(item, "next_seq"),
        version=get_int(item, "version"),
        **{name: get_s(item, name) or "" for name in _RUN_STRINGS},
    )


def member_item(session_id: str, run_id: str) -> Item:
    """A run's entry in its session's membership list."""
    return key(keys.session_pk(session_id), keys.member_sk(run_id))


def record_items(record: RunRecord) -> tuple[Item, list[Item], Item]:
    """The record item, the pieces of its payload, and its event key guard."""
    seq = int(record.id)
    pk = keys.run_pk(record.run_id)
    sk = keys.event_sk(seq)
    payload, chunks = blobs.split(pk, sk, record.payload)
    item = {
        **key(pk, sk),
        "seq": n(seq),
        "event_key": s(record.event_key),
        "run_id": s(record.run_id),
        "agent_id": s(record.agent_id),
        "session_id": s(record.session_id),
        "turn_id": s(record.turn_id),
        "type": s(record.type),
        "ts": n(to_ms(record.timestamp)),
        **payload,
    }
    guard = {**key(pk, keys.guard_sk(record.event_key)), "seq": n(seq), "event_key": s(record.event_key)}
    return item, chunks, guard


def record_from_item(item: Item, payload: bytes) -> RunRecord:
    return RunRecord(
        id=str(get_int(item, "seq")),
        event_key=get_s(item, "event_key") or "",
        run_id=get_s(item, "run_id") or "",
        agent_id=get_s(item, "agent_id") or "",
        session_id=get_s(item, "session_id") or "",
        turn_id=get_s(item, "turn_id") or "",
        type=get_s(item, "type") or "",
        payload=payload,
        timestamp=from_ms(get_int(item, "ts")),
    )


def guarded_seq(guard: Item) -> int:
    """The sequence of the record an event key guard points to."""
    return get_int(guard, "seq")


def pointer_item(session_id: str, pointer: Pointer) -> Item:
    return {
        **key(keys.session_pk(session_id), keys.pointer_sk(pointer.position)),
        "run_id": s(pointer.run_id),
        "record_id": s(pointer.record_id),
    }


def pointer_from_item(item: Item) -> Pointer:
    return Pointer(
        position=keys.position_of(item["sk"]["S"]),
        run_id=get_s(item, "run_id") or "",
        record_id=get_s(item, "record_id") or "",
    )


def checkpoint_items(run_id: str, suspension: RunSuspension) -> tuple[Item, list[Item]]:
    """The checkpoint item and the pieces of its data."""
    pk = keys.run_pk(run_id)
    payload, chunks = blobs.split(pk, keys.CHECKPOINT, suspension.data)
    return {**key(pk, keys.CHECKPOINT), "suspension_id": s(suspension.id), **payload}, chunks


def checkpoint_from_item(item: Item, data: bytes) -> RunSuspension:
    return RunSuspension(id=get_s(item, "suspension_id") or "", data=data)


# -- initial history (seeds) -------------------------------------------------------

_OPERATION = ("agent_id", "run_id", "command_id", "session_id")
_ATTEMPT_FLAGS = ("literal_open", "has_source", "published", "abandoned")


def _operation_attributes(operation: PreparationOperation) -> Item:
    return {name: s(getattr(operation, name)) for name in _OPERATION}


def _operation_from(item: Item) -> PreparationOperation:
    return PreparationOperation(**{name: get_s(item, name) or "" for name in _OPERATION})


def seed_member_item(session_id: str, run_id: str) -> Item:
    """A run id with initial history in its session, so purge finds it before any start."""
    return key(keys.session_pk(session_id), keys.seed_member_sk(run_id))


def seed_head_item(head: SeedHead) -> Item:
    item = {
        **key(keys.run_pk(head.run_id), keys.SEED_HEAD),
        **_operation_attributes(head.operation),
        "published_attempt": s(head.published_attempt),
    }
    if head.published is not None:
        item["published_seed_end_id"] = s(head.published.seed_end_id)
        item["published_kind"] = s(head.published.kind)
        item["published_source_run_id"] = s(head.published.source_run_id)
    return item


def seed_head_from_item(item: Item) -> SeedHead:
    return SeedHead(
        operation=_operation_from(item),
        published_attempt=get_s(item, "published_attempt") or "",
        published=_published_from(item),
        version=get_int(item, "version"),
    )


def _published_from(item: Item) -> PublishedSeed | None:
    """The published attempt's summary, None where the head has none (kept from before heads carried it)."""
    if "published_seed_end_id" not in item:
        return None
    return PublishedSeed(
        seed_end_id=get_s(item, "published_seed_end_id") or "",
        kind=SeedKind(get_s(item, "published_kind") or ""),
        source_run_id=get_s(item, "published_source_run_id") or "",
    )


def seed_attempt_item(attempt: SeedAttempt) -> Item:
    """The attempt's changing state; its declaration is a separate item written once."""
    item = {
        **key(keys.run_pk(attempt.run_id), keys.seed_attempt_sk(attempt.attempt_id)),
        **_operation_attributes(attempt.operation),
        "attempt_id": s(attempt.attempt_id),
        "begun": n(attempt.declaration is not None),
        "source": s(json.dumps(wire.encode(attempt.source))),
        "seed_end_id": s(attempt.seed_end_id),
        "end_id": s(attempt.end_id),
        "count": n(attempt.count),
        "prepared_bytes": n(attempt.prepared_bytes),
    }
    item.update({name: n(getattr(attempt, name)) for name in _ATTEMPT_FLAGS})
    return item


def seed_attempt_begun(item: Item) -> bool:
    return bool(get_int(item, "begun"))


def seed_attempt_from_item(item: Item, declaration: SeedDeclaration | None) -> SeedAttempt:
    return SeedAttempt(
        operation=_operation_from(item),
        attempt_id=get_s(item, "attempt_id") or "",
        declaration=declaration,
        source=wire.decode(HistoryPrefix | None, json.loads(get_s(item, "source") or "null")),
        seed_end_id=get_s(item, "seed_end_id") or "",
        end_id=get_s(item, "end_id") or "",
        count=get_int(item, "count"),
        prepared_bytes=get_int(item, "prepared_bytes"),
        version=get_int(item, "version"),
        **{name: bool(get_int(item, name)) for name in _ATTEMPT_FLAGS},
    )


def seed_declaration_items(declaration: SeedDeclaration) -> tuple[Item, list[Item]]:
    """The declaration (up to a megabyte of rendered prompts) and the pieces of its JSON."""
    pk = keys.run_pk(declaration.run_id)
    sk = keys.seed_declaration_sk(declaration.attempt_id)
    payload, chunks = blobs.split(pk, sk, json.dumps(wire.encode(declaration)).encode())
    return {**key(pk, sk), **payload}, chunks


def seed_declaration_from(data: bytes) -> SeedDeclaration:
    declaration: SeedDeclaration = wire.decode(SeedDeclaration, json.loads(data))
    return declaration


def seed_record_items(run_id: str, attempt_id: str, record: SeedRecord) -> tuple[Item, list[Item], Item]:
    """The record item, the pieces of its bytes, and its key guard."""
    seq = int(record.id)
    pk = keys.run_pk(run_id)
    sk = keys.seed_record_sk(attempt_id, seq)
    part = record.literal_part
    data = record.messages or record.prepared or (part.data if part is not None else b"")
    payload, chunks = blobs.split(pk, sk, data) if data else ({}, [])
    item = {
        **key(pk, sk),
        "seq": n(seq),
        "key": s(record.key),
        "previous_id": s(record.previous_id),
        "variant": s(
            "messages"
            if record.messages
            else "prepared"
            if record.prepared
            else "part"
            if part is not None
            else "prefix"
        ),
        "final": n(bool(part and part.final)),
        "prefix": s(json.dumps(wire.encode(record.prefix))),
        **payload,
    }
    guard = {**key(pk, keys.seed_guard_sk(attempt_id, record.key)), "seq": n(seq)}
    return item, chunks, guard


def seed_record_from_item(item: Item, data: bytes) -> SeedRecord:
    variant = get_s(item, "variant")
    return SeedRecord(
        id=str(get_int(item, "seq")),
        key=get_s(item, "key") or "",
        previous_id=get_s(item, "previous_id") or "",
        messages=data if variant == "messages" else b"",
        prepared=data if variant == "prepared" else b"",
        literal_part=LiteralPart(data=data, final=bool(get_int(item, "final"))) if variant == "part" else None,
        prefix=wire.decode(HistoryPrefix | None, json.loads(get_s(item, "prefix") or "null")),
    )
