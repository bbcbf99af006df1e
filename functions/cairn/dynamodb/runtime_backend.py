"""The runtime store's DynamoDB backend: optimistic units of work.

A unit of work reads items with consistent reads and remembers the
`version` of every session and run head it saw. Its commit is one
`TransactWriteItems`: heads it changed are written under `version = :seen`
(or `attribute_not_exists` when new), heads it only read are
`ConditionCheck`ed the same way, and records, key guards, session pointers
and checkpoints are created under `attribute_not_exists`. If any of that
fails, something it read has changed: the operation runs again on fresh
state, so a conflict is only ever reported after a consistent re-read.

Items (single table):
  S#<session> META | P#<position> (commit-ordered pointer) | R#<run> (membership)
  R#<run> META | E#<seq> record | C#<seq>#<n> payload chunk | K#<sha256(key)> guard
  R#<run> CKPT checkpoint | CK#<n> checkpoint chunk
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from cairn import credentials
from cairn.decimal_text import is_decimal
from cairn.dynamodb import blobs
from cairn.dynamodb.items import b, error_code, get_int, get_s, key, n, s
from cairn.runtime.errors import RuntimeStoreUnavailable
from cairn.runtime.model import RunMeta, RunRecord, RunStartOutcome, RunStatus, RunSuspension
from cairn.runtime.state import PURGED, PURGING, BufferedUnitOfWork, Pointer, RunState, SessionState, UnitOfWork

T = TypeVar("T")

SEQ_WIDTH = 12
META = "META"
CHECKPOINT = "CKPT"
_BUDGET_SECONDS = 10.0
_BATCH = 25
_RETRYABLE = {"TransactionCanceledException", "TransactionConflictException"}
_TURN_STRIPES = 64


def session_pk(session_id: str) -> str:
    return f"S#{session_id}"


def run_pk(run_id: str) -> str:
    return f"R#{run_id}"


def record_sk(seq: int) -> str:
    return f"E#{seq:0{SEQ_WIDTH}d}"


def chunk_sk(seq: int, index: int) -> str:
    return f"C#{seq:0{SEQ_WIDTH}d}#{index:03d}"


def guard_sk(event_key: str) -> str:
    return f"K#{credentials.digest(event_key)}"


def pointer_sk(position: int) -> str:
    return f"P#{position:0{SEQ_WIDTH}d}"


def member_sk(run_id: str) -> str:
    return f"R#{run_id}"


def to_ms(moment: datetime | None) -> int:
    return 0 if moment is None else round(moment.timestamp() * 1000)


def from_ms(value: int) -> datetime | None:
    return None if not value else datetime.fromtimestamp(value / 1000, UTC)


class _Conflict(Exception):
    """The commit lost a race: run the operation again."""


class DynamoRuntimeBackend:
    def __init__(self, client, table_name: str) -> None:
        self._client = client
        self._table = table_name
        # Units of work in this process that lost a race on a head take turns
        # on it (striped by head), so they queue here instead of sending
        # transactions bound to cancel each other. Uncontended units never wait.
        self._turns = [threading.Lock() for _ in range(_TURN_STRIPES)]

    # -- units of work -----------------------------------------------------------

    def transact(self, operation: Callable[[UnitOfWork], T]) -> T:
        deadline = time.monotonic() + _BUDGET_SECONDS
        attempt = 0
        with ExitStack() as turns:
            taking_turns = False
            while True:
                unit = _DynamoUnitOfWork(self)
                try:
                    # A read can meet a conflicting transaction too: start the unit over.
                    result = self._call(lambda: operation(unit))
                    if not taking_turns and unit.changes_anything() and self._contended(unit):
                        # Others here are queued on these heads: committing now would race them.
                        self._take_turns(turns, unit)
                        taking_turns = True
                        continue
                    self._call(unit.commit)
                    return result
                except _Conflict:
                    attempt += 1
                    if time.monotonic() >= deadline:
                        raise RuntimeStoreUnavailable("runtime store is too busy; retry") from None
                    if not taking_turns:
                        self._take_turns(turns, unit)
                        taking_turns = True
                    # Whoever won may be another process: back off before the re-read.
                    time.sleep(random.uniform(0, 0.001 * min(2**attempt, 100)))

    def _stripes(self, unit: _DynamoUnitOfWork) -> list[int]:
        return sorted({hash(head) % _TURN_STRIPES for head in unit.heads()})

    def _contended(self, unit: _DynamoUnitOfWork) -> bool:
        return any(self._turns[stripe].locked() for stripe in self._stripes(unit))

    def _take_turns(self, turns: ExitStack, unit: _DynamoUnitOfWork) -> None:
        """Hold the turn of every head `unit` read until the unit commits.

        All at once and in stripe order, and nothing else is taken while they
        are held, so two units waiting on each other's heads cannot deadlock.
        """
        for stripe in self._stripes(unit):
            turns.enter_context(self._turns[stripe])

    @staticmethod
    def _call(action: Callable[[], T], *, in_unit: bool = True) -> T:
        """Storage failures become the transient, unwrapped runtime error.

        Inside a unit of work a conflict runs the unit again; outside one
        (purge, membership reads) there is nothing to run again, so a
        conflict is transient to the caller like any other failure.
        """
        try:
            return action()
        except ClientError as error:
            if in_unit and error_code(error) in _RETRYABLE:
                raise _Conflict() from error
            raise RuntimeStoreUnavailable(f"runtime store unavailable: {error_code(error)}") from error
        except BotoCoreError as error:
            raise RuntimeStoreUnavailable("runtime store unreachable") from error

    # -- reads ---------------------------------------------------------------------

    def get(self, pk: str, sk: str) -> dict[str, Any] | None:
        response = self._client.get_item(TableName=self._table, Key=key(pk, sk), ConsistentRead=True)
        return response.get("Item")

    def query(self, pk: str, lower: str | None, upper: str | None, **extra: Any) -> Iterator[dict[str, Any]]:
        """Items of one partition, between two sort keys when given."""
        params: dict[str, Any] = {
            "TableName": self._table,
            "ConsistentRead": True,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": s(pk)},
            **extra,
        }
        if lower is not None and upper is not None:
            params["KeyConditionExpression"] += " AND sk BETWEEN :lo AND :hi"
            params["ExpressionAttributeValues"].update({":lo": s(lower), ":hi": s(upper)})
        while True:
            response = self._client.query(**params)
            yield from response.get("Items", [])
            if "LastEvaluatedKey" not in response:
                return
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def load_session(self, session_id: str) -> SessionState | None:
        item = self.get(session_pk(session_id), META)
        return _session_from_item(session_id, item) if item else None

    def load_run(self, run_id: str) -> RunState | None:
        item = self.get(run_pk(run_id), META)
        return _run_from_item(item) if item else None

    def load_checkpoint(self, run_id: str) -> RunSuspension | None:
        item = self.get(run_pk(run_id), CHECKPOINT)
        if not item:
            return None
        data = self._payload(run_pk(run_id), item, lambda index: f"CK#{index:03d}")
        return RunSuspension(id=get_s(item, "suspension_id") or "", data=data)

    def session_run_ids(self, session_id: str) -> list[str]:
        items = self._call(
            lambda: list(self.query(session_pk(session_id), "R#", "R#~", ProjectionExpression="sk")), in_unit=False
        )
        return [item["sk"]["S"].removeprefix("R#") for item in items]

    def records(
        self, run_id: str, after_seq: int, through_seq: int | None = None, page_size: int = 200
    ) -> Iterator[RunRecord]:
        pk = run_pk(run_id)
        upper = record_sk(through_seq) if through_seq is not None else "E#~"
        for item in self.query(pk, record_sk(after_seq + 1), upper, Limit=page_size):
            yield self._record_from_item(pk, item)

    def record(self, run_id: str, record_id: str) -> RunRecord | None:
        if not is_decimal(record_id) or len(record_id) > SEQ_WIDTH:
            return None
        pk = run_pk(run_id)
        item = self.get(pk, record_sk(int(record_id)))
        return self._record_from_item(pk, item) if item else None

    def record_by_key(self, run_id: str, event_key: str) -> RunRecord | None:
        guard = self.get(run_pk(run_id), guard_sk(event_key))
        return self.record(run_id, str(get_int(guard, "seq"))) if guard else None

    def pointers(self, session_id: str, after_position: int) -> Iterator[Pointer]:
        for item in self.query(session_pk(session_id), pointer_sk(after_position + 1), "P#~", Limit=200):
            yield Pointer(
                position=int(item["sk"]["S"][2:]),
                run_id=get_s(item, "run_id") or "",
                record_id=get_s(item, "record_id") or "",
            )

    def _record_from_item(self, pk: str, item: dict[str, Any]) -> RunRecord:
        seq = get_int(item, "seq")
        return RunRecord(
            id=str(seq),
            event_key=get_s(item, "event_key") or "",
            run_id=get_s(item, "run_id") or "",
            agent_id=get_s(item, "agent_id") or "",
            session_id=get_s(item, "session_id") or "",
            turn_id=get_s(item, "turn_id") or "",
            type=get_s(item, "type") or "",
            payload=self._payload(pk, item, lambda index: chunk_sk(seq, index)),
            timestamp=from_ms(get_int(item, "ts")),
        )

    def _payload(self, pk: str, item: dict[str, Any], chunk_key: Callable[[int], str]) -> bytes:
        if "data" in item:
            return bytes(item["data"]["B"])
        count = get_int(item, "chunks")
        return b"".join(bytes(self.get(pk, chunk_key(index))["data"]["B"]) for index in range(count))

    # -- purge ---------------------------------------------------------------------

    def purge(self, session_id: str, run_ids: list[str]) -> None:
        """Delete in batches, runs first and the membership list last, so a
        purge interrupted anywhere resumes from `purging` and finishes.

        A storage failure is `RuntimeStoreUnavailable` like any other
        mutation's, never a raw botocore error: the caller calls purge again.
        """
        self._call(lambda: self._purge(session_id, run_ids), in_unit=False)

    def _purge(self, session_id: str, run_ids: list[str]) -> None:
        for run_id in run_ids:
            self._delete_all(run_pk(run_id), None, None)
        pk = session_pk(session_id)
        self._delete_all(pk, "P#", "P#~")
        self._delete_all(pk, "R#", "R#~")
        self._client.update_item(
            TableName=self._table,
            Key=key(pk, META),
            UpdateExpression="SET #status = :purged, version = version + :one",
            ConditionExpression="#status IN (:purging, :purged)",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":purged": s(PURGED), ":purging": s(PURGING), ":one": n(1)},
        )

    def _delete_all(self, pk: str, lower: str | None, upper: str | None) -> None:
        item_keys = [
            {"pk": item["pk"], "sk": item["sk"]}
            for item in self.query(pk, lower, upper, ProjectionExpression="pk, sk")
        ]
        for start in range(0, len(item_keys), _BATCH):
            pending = {self._table: [{"DeleteRequest": {"Key": k}} for k in item_keys[start : start + _BATCH]]}
            for attempt in range(10):
                pending = self._client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                if not pending:
                    break
                time.sleep(0.05 * (attempt + 1))
            else:
                raise RuntimeStoreUnavailable("purge is throttled; call purge again to resume")

    # -- commit --------------------------------------------------------------------

    def commit(self, actions: list[dict[str, Any]]) -> None:
        if not actions:
            return
        try:
            self._client.transact_write_items(TransactItems=actions)
        except ClientError as error:
            if error_code(error) in _RETRYABLE:
                raise _Conflict() from error
            raise

    def put(self, item: dict[str, Any], condition: str, values: dict[str, Any] | None = None) -> dict[str, Any]:
        action: dict[str, Any] = {"TableName": self._table, "Item": item, "ConditionExpression": condition}
        if values:
            action["ExpressionAttributeValues"] = values
        return {"Put": action}

    def check(self, pk: str, sk: str, condition: str, values: dict[str, Any] | None = None) -> dict[str, Any]:
        action: dict[str, Any] = {"TableName": self._table, "Key": key(pk, sk), "ConditionExpression": condition}
        if values:
            action["ExpressionAttributeValues"] = values
        return {"ConditionCheck": action}


class _DynamoUnitOfWork(BufferedUnitOfWork):
    def __init__(self, backend: DynamoRuntimeBackend) -> None:
        super().__init__()
        self._backend = backend
        self._seen_sessions: dict[str, int | None] = {}
        self._seen_runs: dict[str, int | None] = {}

    def load_session(self, session_id: str) -> SessionState | None:
        session = self._backend.load_session(session_id)
        self._seen_sessions[session_id] = None if session is None else session.version
        return session

    def load_run(self, run_id: str) -> RunState | None:
        run = self._backend.load_run(run_id)
        self._seen_runs[run_id] = None if run is None else run.version
        return run

    def heads(self) -> set[str]:
        """The session and run heads this unit read, as item keys."""
        return {session_pk(session_id) for session_id in self._seen_sessions} | {
            run_pk(run_id) for run_id in self._seen_runs
        }

    def load_record_by_key(self, run_id: str, event_key: str) -> RunRecord | None:
        return self._backend.record_by_key(run_id, event_key)

    def load_checkpoint(self, run_id: str) -> RunSuspension | None:
        return self._backend.load_checkpoint(run_id)

    def changes_anything(self) -> bool:
        """Whether committing would write; a unit that only read (an exact retry) never races."""
        writes = self.writes
        return bool(writes.sessions or writes.runs or writes.records or writes.pointers or writes.checkpoints)

    def commit(self) -> None:
        """One transaction for all changes; nothing at all when nothing changed."""
        backend = self._backend
        writes = self.writes
        if not self.changes_anything():
            return
        actions: list[dict[str, Any]] = []
        for session_id in self._seen_sessions.keys() | writes.sessions.keys():
            seen = self._seen_sessions.get(session_id)
            if session_id in writes.sessions:
                actions.append(_versioned_put(backend, _session_item(writes.sessions[session_id]), seen))
            else:
                actions.append(_versioned_check(backend, session_pk(session_id), seen))
        for run_id in self._seen_runs.keys() | writes.runs.keys():
            seen = self._seen_runs.get(run_id)
            if run_id in writes.runs:
                run = writes.runs[run_id]
                actions.append(_versioned_put(backend, _run_item(run), seen))
                if seen is None and run.meta.session_id:
                    member = key(session_pk(run.meta.session_id), member_sk(run_id))
                    actions.append(backend.put(member, "attribute_not_exists(pk)"))
            else:
                actions.append(_versioned_check(backend, run_pk(run_id), seen))
        for record in writes.records:
            actions.extend(_record_puts(backend, record))
        for session_id, pointer in writes.pointers:
            item = {
                **key(session_pk(session_id), pointer_sk(pointer.position)),
                "run_id": s(pointer.run_id),
                "record_id": s(pointer.record_id),
            }
            actions.append(backend.put(item, "attribute_not_exists(pk)"))
        for run_id, suspension in writes.checkpoints.items():
            actions.extend(
                _payload_puts(
                    backend,
                    {**key(run_pk(run_id), CHECKPOINT), "suspension_id": s(suspension.id)},
                    suspension.data,
                    lambda index, run_id=run_id: key(run_pk(run_id), f"CK#{index:03d}"),
                )
            )
        backend.commit(actions)


def _versioned_put(backend: DynamoRuntimeBackend, item: dict[str, Any], seen: int | None) -> dict[str, Any]:
    item["version"] = n((seen or 0) + 1)
    if seen is None:
        return backend.put(item, "attribute_not_exists(pk)")
    return backend.put(item, "version = :seen", {":seen": n(seen)})


def _versioned_check(backend: DynamoRuntimeBackend, pk: str, seen: int | None) -> dict[str, Any]:
    if seen is None:
        return backend.check(pk, META, "attribute_not_exists(pk)")
    return backend.check(pk, META, "version = :seen", {":seen": n(seen)})


def _record_puts(backend: DynamoRuntimeBackend, record: RunRecord) -> list[dict[str, Any]]:
    seq = int(record.id)
    pk = run_pk(record.run_id)
    item = {
        **key(pk, record_sk(seq)),
        "seq": n(seq),
        "event_key": s(record.event_key),
        "run_id": s(record.run_id),
        "agent_id": s(record.agent_id),
        "session_id": s(record.session_id),
        "turn_id": s(record.turn_id),
        "type": s(record.type),
        "ts": n(to_ms(record.timestamp)),
    }
    guard = {**key(pk, guard_sk(record.event_key)), "seq": n(seq), "event_key": s(record.event_key)}
    puts = _payload_puts(backend, item, record.payload, lambda index: key(pk, chunk_sk(seq, index)))
    return [*puts, backend.put(guard, "attribute_not_exists(pk)")]


def _payload_puts(
    backend: DynamoRuntimeBackend, item: dict[str, Any], data: bytes, chunk_key: Callable[[int], dict[str, Any]]
) -> list[dict[str, Any]]:
    pieces = blobs.pieces(data)
    if len(pieces) == 1:
        item["data"] = b(data)
        return [backend.put(item, "attribute_not_exists(pk)")]
    item["chunks"] = n(len(pieces))
    chunks = [backend.put({**chunk_key(index), "data": b(piece)}, "attribute_not_exists(pk)") for index, piece in enumerate(pieces)]
    return [backend.put(item, "attribute_not_exists(pk)"), *chunks]


def _session_item(session: SessionState) -> dict[str, Any]:
    return {
        **key(session_pk(session.id), META),
        "status": s(session.status),
        "created_at": n(to_ms(session.created_at)),
        "ended_at": n(to_ms(session.ended_at)),
        "list_seq": n(session.list_seq),
        "running_runs": n(session.running_runs),
    }


def _session_from_item(session_id: str, item: dict[str, Any]) -> SessionState:
    return SessionState(
        id=session_id,
        status=get_s(item, "status") or "",
        created_at=from_ms(get_int(item, "created_at")),
        ended_at=from_ms(get_int(item, "ended_at")),
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


def _run_item(run: RunState) -> dict[str, Any]:
    meta = run.meta
    item = {
        **key(run_pk(meta.run_id), META),
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


def _run_from_item(item: dict[str, Any]) -> RunState:
    digest = bytes(item["request_digest"]["B"])
    return RunState(
        meta=RunMeta(
            agent_id=get_s(item, "agent_id") or "",
            run_id=get_s(item, "run_id") or "",
            status=RunStatus(get_s(item, "status")),
            start_outcome=RunStartOutcome(get_s(item, "start_outcome")),
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
