"""The runtime store's DynamoDB backend: optimistic units of work.

A unit of work reads items with consistent reads and remembers the
`version` of every session and run head it saw. Its commit is one
`TransactWriteItems`: heads it changed are written under `version = :seen`
(or `attribute_not_exists` when new), heads it only read are
`ConditionCheck`ed the same way, and records, key guards, session pointers
and checkpoints are created under `attribute_not_exists`. If any of that
fails, something it read has changed: the operation runs again on fresh
state, so a conflict is only ever reported after a consistent re-read.

The call floor. An operation that says what it reads first (`Reads`) gets
those items in one consistent `BatchGetItem`; and the session and run heads
this process last wrote or read are kept (`_HeadCache`), so a writer that
appends again trusts them, assumes its new key is free, and sends only the
transaction: its conditions check both. A head that changed meanwhile comes
back with the failed condition (`ReturnValuesOnConditionCheckFailure`), so
the next attempt needs no read for it; a key that was taken makes the next
attempt read the keys. An error decided on trusted state is never reported:
the operation runs once more on state read in full, and answers from that.
Seed commands read their seed head, attempt, declaration and key guards in
that same first call, with the session a kept seed head names. An append
or publication that learns its session only from the attempt does not read
it: its transaction checks that the session is there and not purged.

Keys are in `keys`, item shapes in `runtime_items`; this module holds the
reads, the commit and the purge.
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

from botocore.exceptions import BotoCoreError, ClientError

from cairn.decimal_text import is_decimal
from cairn.dynamodb import blobs, keys, runtime_items, table_ops
from cairn.dynamodb.items import error_code, get_int, key, n, s
from cairn.runtime.backend import Reads
from cairn.runtime.errors import ContractError, RuntimeStoreUnavailable
from cairn.runtime.model import RunRecord, RunSuspension, SeedRecord
from cairn.runtime.state import (
    PURGED,
    PURGING,
    BufferedUnitOfWork,
    Pointer,
    RunState,
    SeedAttempt,
    SeedHead,
    SessionState,
    UnitOfWork,
)

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

T = TypeVar("T")

_BUDGET_SECONDS = 10.0
_RETRYABLE = {"TransactionCanceledException", "TransactionConflictException"}
_TURN_STRIPES = 64
_CACHED_HEADS = 4096

ItemKey = tuple[str, str]


class _Conflict(Exception):
    """The commit lost a race: run the operation again. `reasons`: DynamoDB's, one per action, if it gave them."""

    def __init__(self, reasons: list[dict[str, Any]] | None = None) -> None:
        super().__init__()
        self.reasons = reasons or []


class _HeadCache:
    """Session, run and seed head items as this process last wrote, read or was shown them, newest kept.

    Session and run heads may be trusted (their commit conditions check them); seed heads only
    say what a seed command will read (`DynamoRuntimeBackend._hinted`).
    """

    def __init__(self, size: int = _CACHED_HEADS) -> None:
        self._items: OrderedDict[ItemKey, dict[str, Any]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, item_key: ItemKey) -> dict[str, Any] | None:
        with self._lock:
            return self._items.get(item_key)

    def put(self, item_key: ItemKey, item: dict[str, Any] | None) -> None:
        """Remember `item` unless a newer version is kept (forget the key for None: deleted or unknown).

        Threads learn heads out of order (a failed commit's old item can
        arrive after another thread's newer write): a head only moves forward.
        """
        with self._lock:
            if item is None:
                self._items.pop(item_key, None)
                return
            kept = self._items.get(item_key)
            if kept is not None and get_int(kept, "version") > get_int(item, "version"):
                return
            self._items[item_key] = item
            self._items.move_to_end(item_key)
            if len(self._items) > self._size:
                self._items.popitem(last=False)


@dataclass
class _Trust:
    """What one attempt may take without reading it: cached heads, and free keys."""

    heads: bool = True
    free_keys: bool = True


class DynamoRuntimeBackend:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name
        # Units of work in this process that lost a race on a head take turns
        # on it (striped by head), so they queue here instead of sending
        # transactions bound to cancel each other. Uncontended units never wait.
        self._turns = [threading.Lock() for _ in range(_TURN_STRIPES)]
        self.heads = _HeadCache()

    # -- units of work -----------------------------------------------------------

    def transact(self, operation: Callable[[UnitOfWork], T], reads: Reads | None = None) -> T:
        deadline = time.monotonic() + _BUDGET_SECONDS
        attempt = 0
        trust = _Trust()
        if reads is not None:
            reads = self._hinted(reads)
        with ExitStack() as turns:
            taking_turns = False
            if reads is not None:
                # An attempt that trusts kept heads sends its transaction at once: writers here on the
                # same heads queue first, or each would commit on what the one before it replaced.
                heads = {keys.run_pk(run_id) for run_id in reads.runs}
                self._hold(turns, heads | {keys.session_pk(session_id) for session_id in reads.sessions})
                taking_turns = True
            while True:
                unit = _DynamoUnitOfWork(self, trust)
                try:
                    # A read can meet a conflicting transaction too: start the unit over.
                    if reads is not None:
                        self._call(partial(unit.prefetch, reads))
                    try:
                        result = self._call(partial(operation, unit))
                    except ContractError:
                        if not unit.trusted:
                            raise
                        trust = _Trust(heads=False, free_keys=False)  # decide on what a full read shows
                        continue
                    if unit.trusted and not unit.changes_anything():
                        # No commit will check what was trusted: answer from a full read instead.
                        trust = _Trust(heads=False, free_keys=False)
                        continue
                    if not taking_turns and unit.changes_anything() and self._contended(unit):
                        # Others here are queued on these heads: committing now would race them.
                        self._take_turns(turns, unit)
                        taking_turns = True
                        continue
                    self._call(unit.commit)
                    return result
                except _Conflict as conflict:
                    trust = unit.learn(conflict.reasons)
                    attempt += 1
                    if time.monotonic() >= deadline:
                        raise RuntimeStoreUnavailable("runtime store is too busy; retry") from None
                    if not taking_turns:
                        self._take_turns(turns, unit)
                        taking_turns = True
                    # Whoever won may be another process: back off before the re-read.
                    time.sleep(random.uniform(0, 0.001 * min(2**attempt, 100)))

    def _hinted(self, reads: Reads) -> Reads:
        """`reads` and what the seed heads this process kept say the operation will read next.

        A seed command names its run and attempt, not its session, and a start
        attaching a seed does not name the attempt its head published; without
        these the operation would read them one by one after the batch. A seed
        head's session never changes, and a published attempt stays published,
        so the kept head is a sound guess; and only a guess of what to fetch:
        the seed items themselves are always read, and a wrong guess only
        costs the read the operation then makes itself. A head that carries
        its published attempt's summary (`PublishedSeed`) answers a start
        alone: its attempt is not fetched.
        """
        sessions, attempts = list(reads.sessions), list(reads.seed_attempts)
        for run_id in dict.fromkeys([*reads.seed_runs, *(run_id for run_id, _ in reads.seed_attempts)]):
            item = self.heads.get((keys.run_pk(run_id), keys.SEED_HEAD))
            if item is None:
                continue
            head = runtime_items.seed_head_from_item(item)
            sessions.append(head.operation.session_id)
            if head.published_attempt and head.published is None and run_id in reads.seed_runs:
                attempts.append((run_id, head.published_attempt))
        return replace(
            reads,
            sessions=tuple(dict.fromkeys(session for session in sessions if session)),
            seed_attempts=tuple(dict.fromkeys(attempts)),
        )

    @staticmethod
    def _stripes(heads: set[str]) -> list[int]:
        return sorted({hash(head) % _TURN_STRIPES for head in heads})

    def _contended(self, unit: _DynamoUnitOfWork) -> bool:
        return any(self._turns[stripe].locked() for stripe in self._stripes(unit.heads()))

    def _take_turns(self, turns: ExitStack, unit: _DynamoUnitOfWork) -> None:
        """Hold the turn of every head `unit` read until the unit commits."""
        self._hold(turns, unit.heads())

    def _hold(self, turns: ExitStack, heads: set[str]) -> None:
        """Hold the turns of `heads` until `turns` closes.

        All at once and in stripe order, and nothing else is taken while they
        are held, so two units waiting on each other's heads cannot deadlock.
        """
        for stripe in self._stripes(heads):
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
            if error_code(error) == "ValidationException":
                # What the request holds (an id longer than a key, labels larger than an item): sending it
                # again cannot change the answer, so it is no transient failure.
                message = error.response.get("Error", {}).get("Message", "")
                raise ContractError(f"the store cannot hold this: {message}") from error
            raise RuntimeStoreUnavailable(f"runtime store unavailable: {error_code(error)}") from error
        except BotoCoreError as error:
            raise RuntimeStoreUnavailable("runtime store unreachable") from error

    # -- reads ---------------------------------------------------------------------

    def get(self, pk: str, sk: str) -> dict[str, Any] | None:
        response = self._client.get_item(TableName=self._table, Key=key(pk, sk), ConsistentRead=True)
        return response.get("Item")

    def get_many(self, item_keys: list[ItemKey]) -> dict[ItemKey, dict[str, Any] | None]:
        """Each item (None if absent), consistently, in one call for up to 100."""
        if len(item_keys) == 1:
            [(pk, sk)] = item_keys
            return {(pk, sk): self.get(pk, sk)}
        found = table_ops.batch_get(
            self._client,
            self._table,
            [key(pk, sk) for pk, sk in item_keys],
            exhausted=lambda: RuntimeStoreUnavailable("runtime store is throttled; retry"),
        )
        items = {(item["pk"]["S"], item["sk"]["S"]): item for item in found}
        return {item_key: items.get(item_key) for item_key in item_keys}

    def query(self, pk: str, lower: str | None, upper: str | None, **extra: Any) -> Iterator[dict[str, Any]]:
        """Items of one partition, between two sort keys when given."""
        return table_ops.query_range(self._client, self._table, pk, lower, upper, **extra)

    def load_session(self, session_id: str) -> SessionState | None:
        item = self.get(keys.session_pk(session_id), keys.META)
        return runtime_items.session_from_item(session_id, item) if item else None

    def load_run(self, run_id: str) -> RunState | None:
        item = self.get(keys.run_pk(run_id), keys.META)
        return runtime_items.run_from_item(item) if item else None

    def load_checkpoint(self, run_id: str) -> RunSuspension | None:
        item = self.get(keys.run_pk(run_id), keys.CHECKPOINT)
        if not item:
            return None
        return runtime_items.checkpoint_from_item(item, self._payload(item, keys.LEGACY_CHECKPOINT_CHUNK_PREFIX))

    def session_run_ids(self, session_id: str) -> list[str]:
        pk = keys.session_pk(session_id)
        prefix = keys.MEMBER_PREFIX
        items = self._call(
            lambda: list(self.query(pk, prefix, keys.upper_bound(prefix), ProjectionExpression="sk")), in_unit=False
        )
        return [keys.member_of(item["sk"]["S"]) for item in items]

    def records(
        self, run_id: str, after_seq: int, through_seq: int | None = None, page_size: int = 200
    ) -> Iterator[RunRecord]:
        pk = keys.run_pk(run_id)
        upper = keys.event_sk(through_seq) if through_seq is not None else keys.events_upper_bound()
        for item in self.query(pk, keys.event_sk(after_seq + 1), upper, Limit=page_size):
            yield self._record_from_item(item)

    def record(self, run_id: str, record_id: str) -> RunRecord | None:
        if not is_decimal(record_id) or len(record_id) > keys.SEQ_WIDTH:
            return None
        item = self.get(keys.run_pk(run_id), keys.event_sk(int(record_id)))
        return self._record_from_item(item) if item else None

    def record_by_key(self, run_id: str, event_key: str) -> RunRecord | None:
        guard = self.get(keys.run_pk(run_id), keys.guard_sk(event_key))
        return self.record(run_id, str(runtime_items.guarded_seq(guard))) if guard else None

    def pointers(self, session_id: str, after_position: int) -> Iterator[Pointer]:
        prefix = keys.POINTER_PREFIX
        items = self.query(
            keys.session_pk(session_id), keys.pointer_sk(after_position + 1), keys.upper_bound(prefix), Limit=200
        )
        for item in items:
            yield runtime_items.pointer_from_item(item)

    def seed_attempt_from(
        self, item: dict[str, Any] | None, declaration_item: dict[str, Any] | None
    ) -> SeedAttempt | None:
        """The attempt its item and its declaration's item (read with it, absent until begun) hold."""
        if not item:
            return None
        declaration = None
        if runtime_items.seed_attempt_begun(item):
            declaration = runtime_items.seed_declaration_from(self._payload(declaration_item or {}, ""))
        return runtime_items.seed_attempt_from_item(item, declaration)

    def seed_record_by_guard(self, run_id: str, attempt_id: str, guard: dict[str, Any] | None) -> SeedRecord | None:
        """The seed record a key guard points to (None for no guard: the key is free)."""
        pk = keys.run_pk(run_id)
        item = self.get(pk, keys.seed_record_sk(attempt_id, get_int(guard, "seq"))) if guard else None
        return self._seed_record_from_item(item) if item else None

    def seed_records(self, run_id: str, attempt_id: str, after_id: int, through_id: int) -> Iterator[SeedRecord]:
        if through_id <= after_id:
            return
        lower, upper = keys.seed_record_sk(attempt_id, after_id + 1), keys.seed_record_sk(attempt_id, through_id)
        # Pages of a few records: a seed page holds at most a megabyte, and records can be that large.
        for item in self.query(keys.run_pk(run_id), lower, upper, Limit=min(through_id - after_id, 64)):
            yield self._seed_record_from_item(item)

    def _seed_record_from_item(self, item: dict[str, Any]) -> SeedRecord:
        return runtime_items.seed_record_from_item(item, self._payload(item, ""))

    def _record_from_item(self, item: dict[str, Any]) -> RunRecord:
        legacy = keys.legacy_event_chunk_prefix(get_int(item, "seq"))
        return runtime_items.record_from_item(item, self._payload(item, legacy))

    def _payload(self, item: dict[str, Any], legacy_prefix: str) -> bytes:
        return blobs.read(self._client, self._table, item, legacy_prefix=legacy_prefix) or b""

    # -- purge ---------------------------------------------------------------------

    def purge(self, session_id: str, run_ids: list[str]) -> None:
        """Delete in batches, runs first and the membership list last, so a
        purge interrupted anywhere resumes from `purging` and finishes.

        A storage failure is `RuntimeStoreUnavailable` like any other
        mutation's, never a raw botocore error: the caller calls purge again.
        """
        self._call(lambda: self._purge(session_id, run_ids), in_unit=False)

    def _purge(self, session_id: str, run_ids: list[str]) -> None:
        pk = keys.session_pk(session_id)
        seeded = [
            keys.seed_member_of(item["sk"]["S"])
            for item in self.query(
                pk, keys.SEED_MEMBER_PREFIX, keys.upper_bound(keys.SEED_MEMBER_PREFIX), ProjectionExpression="sk"
            )
        ]
        for run_id in dict.fromkeys([*run_ids, *seeded]):
            self._delete_all(keys.run_pk(run_id))
        self._delete_all(pk, keys.SEED_MEMBER_PREFIX)
        self._delete_all(pk, keys.POINTER_PREFIX)
        self._delete_all(pk, keys.MEMBER_PREFIX)
        self._client.update_item(
            TableName=self._table,
            Key=key(pk, keys.META),
            UpdateExpression="SET #status = :purged, version = version + :one",
            ConditionExpression="#status IN (:purging, :purged)",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":purged": s(PURGED), ":purging": s(PURGING), ":one": n(1)},
        )

    def _delete_all(self, pk: str, prefix: str | None = None) -> None:
        """Every item of the partition, or of its `prefix` range."""
        upper = None if prefix is None else keys.upper_bound(prefix)
        table_ops.delete_partition(
            self._client,
            self._table,
            pk,
            prefix,
            upper,
            exhausted=lambda: RuntimeStoreUnavailable("purge is throttled; call purge again to resume"),
        )

    # -- commit --------------------------------------------------------------------

    def commit(self, actions: list[dict[str, Any]]) -> None:
        if not actions:
            return
        try:
            table_ops.transact_write(self._client, actions)
        except ClientError as error:
            if error_code(error) in _RETRYABLE:
                raise _Conflict(cast(list[dict[str, Any]], error.response.get("CancellationReasons"))) from error
            raise

    def put(
        self, item: dict[str, Any], condition: str, values: dict[str, Any] | None = None, *, old: bool = False
    ) -> dict[str, Any]:
        """A conditional Put; with `old`, a failed condition returns the stored item."""
        action: dict[str, Any] = {"TableName": self._table, "Item": item, "ConditionExpression": condition}
        if values:
            action["ExpressionAttributeValues"] = values
        if old:
            action["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return {"Put": action}

    def check(
        self,
        pk: str,
        sk: str,
        condition: str,
        values: dict[str, Any] | None = None,
        *,
        names: dict[str, str] | None = None,
        old: bool = False,
    ) -> dict[str, Any]:
        action: dict[str, Any] = {"TableName": self._table, "Key": key(pk, sk), "ConditionExpression": condition}
        if values:
            action["ExpressionAttributeValues"] = values
        if names:
            action["ExpressionAttributeNames"] = names
        if old:
            action["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return {"ConditionCheck": action}


class _DynamoUnitOfWork(BufferedUnitOfWork):
    def __init__(self, backend: DynamoRuntimeBackend, trust: _Trust | None = None) -> None:
        super().__init__()
        self._backend = backend
        self._trust = trust or _Trust(heads=False, free_keys=False)
        self._seen_sessions: dict[str, int | None] = {}
        self._seen_runs: dict[str, int | None] = {}
        # Seed heads and attempts are versioned heads too, keyed by their item key.
        self._seen_seeds: dict[tuple[str, str], int | None] = {}
        # Items fetched (or, for trusted heads and free keys, taken) before the operation ran.
        self._known: dict[ItemKey, dict[str, Any] | None] = {}
        # Whether the operation sees anything this attempt did not read.
        self.trusted = False
        # The session or run head behind each action of the last commit (None for other items),
        # and which actions were record key guards.
        self._action_heads: list[ItemKey | None] = []
        self._guards: set[int] = set()
        # Sessions a seed command took as live without reading them, and the actions checking that.
        self._assumed_sessions: set[str] = set()
        self._assumptions: set[int] = set()

    def prefetch(self, reads: Reads) -> None:
        """Fetch what `reads` names in one call, leaving out trusted heads and (then) the keys."""
        heads = [(keys.run_pk(run_id), keys.META) for run_id in reads.runs]
        heads += [(keys.session_pk(session_id), keys.META) for session_id in reads.sessions]
        wanted: list[ItemKey] = []
        for head in dict.fromkeys(heads):
            cached = self._backend.heads.get(head) if self._trust.heads else None
            if cached is None:
                wanted.append(head)
            else:
                self._known[head] = cached
                self.trusted = True
        # Seed heads and attempts are never trusted from memory: they are always read, in the same call.
        wanted += _seed_item_keys(reads)
        record_keys = [(keys.run_pk(run_id), keys.guard_sk(event_key)) for run_id, event_key in reads.keys]
        if wanted or not self._trust.free_keys:
            wanted += record_keys
        else:
            # The writer's own heads, trusted: its new keys are assumed free, and their guards' conditions check it.
            self._known.update(dict.fromkeys(record_keys))
            self.trusted = self.trusted or bool(record_keys)
        if not wanted:
            return
        for item_key, item in self._backend.get_many(wanted).items():
            self._known[item_key] = item
            if item_key[1] in (keys.META, keys.SEED_HEAD):
                self._backend.heads.put(item_key, item)

    def learn(self, reasons: list[dict[str, Any]]) -> _Trust:
        """After a failed commit: take the heads its conditions returned, and trust them if only they moved.

        A record or pointer at a guessed position fails because its head moved
        on, and says nothing more. A key guard that failed (the key is taken),
        a transaction in progress, or no reasons at all: the next attempt
        reads in full.
        """
        trustworthy = bool(reasons) and len(reasons) == len(self._action_heads)
        moved = False
        for index, reason in enumerate(reasons):
            code = reason.get("Code")
            if code in (None, "None"):
                continue
            head = self._action_heads[index] if index < len(self._action_heads) else None
            if head is not None and code == "ConditionalCheckFailed":
                self._backend.heads.put(head, reason.get("Item"))
                moved = True
                continue
            if head is not None:
                self._backend.heads.put(head, None)
            if head is not None or index in self._guards | self._assumptions or code != "ConditionalCheckFailed":
                trustworthy = False
        trusted = trustworthy and moved
        return _Trust(heads=trusted, free_keys=trusted)

    def _known_head(self, item_key: ItemKey) -> tuple[bool, dict[str, Any] | None]:
        """(True, item) when prefetched; otherwise read now (and remembered) as (False, item)."""
        if item_key in self._known:
            return True, self._known[item_key]
        item = self._backend.get(*item_key)
        self._backend.heads.put(item_key, item)
        return False, item

    def load_session(self, session_id: str) -> SessionState | None:
        _, item = self._known_head((keys.session_pk(session_id), keys.META))
        session = runtime_items.session_from_item(session_id, item) if item else None
        self._seen_sessions[session_id] = None if session is None else session.version
        return session

    def session_assumed_live(self, session_id: str) -> bool:
        """Yes when this attempt may trust and the session's head is neither fetched nor kept.

        A seed append or publication in a process that has not seen the seed
        learns its session only from the attempt it read; rather than read the
        session's head after the batch, its commit checks that the session is
        there and not purged. The attempt then counts as trusted: an error it
        decides, an answer without a write, or a failed check is settled by a
        run on state read in full.
        """
        session_key = (keys.session_pk(session_id), keys.META)
        if not self._trust.heads or session_key in self._known:
            return False
        self._assumed_sessions.add(session_id)
        self.trusted = True
        return True

    def load_run(self, run_id: str) -> RunState | None:
        _, item = self._known_head((keys.run_pk(run_id), keys.META))
        run = runtime_items.run_from_item(item) if item else None
        self._seen_runs[run_id] = None if run is None else run.version
        return run

    def _items(self, item_keys: list[ItemKey]) -> list[dict[str, Any] | None]:
        """Each item as prefetched, the rest read now in one call."""
        missing = [item_key for item_key in item_keys if item_key not in self._known]
        if missing:
            self._known.update(self._backend.get_many(missing))
        return [self._known[item_key] for item_key in item_keys]

    def load_seed_head(self, run_id: str) -> SeedHead | None:
        head_key = (keys.run_pk(run_id), keys.SEED_HEAD)
        [item] = self._items([head_key])
        self._backend.heads.put(head_key, item)
        head = runtime_items.seed_head_from_item(item) if item else None
        self._seen_seeds[head_key] = None if head is None else head.version
        return head

    def load_seed_attempt(self, run_id: str, attempt_id: str) -> SeedAttempt | None:
        attempt_key, declaration_key = _seed_attempt_keys(run_id, attempt_id)
        attempt = self._backend.seed_attempt_from(*self._items([attempt_key, declaration_key]))
        self._seen_seeds[attempt_key] = None if attempt is None else attempt.version
        return attempt

    def load_seed_record_by_key(self, run_id: str, attempt_id: str, key: str) -> SeedRecord | None:
        [guard] = self._items([(keys.run_pk(run_id), keys.seed_guard_sk(attempt_id, key))])
        return self._backend.seed_record_by_guard(run_id, attempt_id, guard)

    def heads(self) -> set[str]:
        """The session, run and seed heads this unit read, as item keys."""
        return (
            {keys.session_pk(session_id) for session_id in self._seen_sessions}
            | {keys.run_pk(run_id) for run_id in self._seen_runs}
            | {f"{pk}|{sk}" for pk, sk in self._seen_seeds}
        )

    def load_record_by_key(self, run_id: str, event_key: str) -> RunRecord | None:
        guard_key = (keys.run_pk(run_id), keys.guard_sk(event_key))
        if guard_key not in self._known:
            return self._backend.record_by_key(run_id, event_key)
        guard = self._known[guard_key]
        return self._backend.record(run_id, str(runtime_items.guarded_seq(guard))) if guard else None

    def load_checkpoint(self, run_id: str) -> RunSuspension | None:
        return self._backend.load_checkpoint(run_id)

    def changes_anything(self) -> bool:
        """Whether committing would write; a unit that only read (an exact retry) never races."""
        return self.writes.any()

    def commit(self) -> None:
        """One transaction for all changes; nothing at all when nothing changed."""
        backend = self._backend
        writes = self.writes
        if not self.changes_anything():
            return
        actions: list[dict[str, Any]] = []
        heads: dict[int, ItemKey] = {}
        written: dict[ItemKey, dict[str, Any]] = {}

        def head(item_key: ItemKey, action: dict[str, Any]) -> None:
            heads[len(actions)] = item_key
            actions.append(action)
            if "Put" in action:
                written[item_key] = action["Put"]["Item"]

        for session_id in self._seen_sessions.keys() | writes.sessions.keys():
            seen = self._seen_sessions.get(session_id)
            session_key = (keys.session_pk(session_id), keys.META)
            if session_id in writes.sessions:
                item = runtime_items.session_item(writes.sessions[session_id])
                head(session_key, _versioned_put(backend, item, seen, old=True))
            else:
                head(session_key, _versioned_check(backend, keys.session_pk(session_id), seen, old=True))
        for session_id in self._assumed_sessions - self._seen_sessions.keys() - writes.sessions.keys():
            self._assumptions.add(len(actions))
            actions.append(_live_session_check(backend, session_id))
        for run_id in self._seen_runs.keys() | writes.runs.keys():
            seen = self._seen_runs.get(run_id)
            run_key = (keys.run_pk(run_id), keys.META)
            if run_id in writes.runs:
                run = writes.runs[run_id]
                head(run_key, _versioned_put(backend, runtime_items.run_item(run), seen, old=True))
                if seen is None and run.meta.session_id:
                    member = runtime_items.member_item(run.meta.session_id, run_id)
                    actions.append(backend.put(member, "attribute_not_exists(pk)"))
            else:
                head(run_key, _versioned_check(backend, keys.run_pk(run_id), seen, old=True))
        for record in writes.records:
            item, chunks, guard = runtime_items.record_items(record)
            actions.extend(backend.put(new, "attribute_not_exists(pk)") for new in (item, *chunks))
            self._guards.add(len(actions))
            actions.append(backend.put(guard, "attribute_not_exists(pk)"))
        for session_id, pointer in writes.pointers:
            actions.append(backend.put(runtime_items.pointer_item(session_id, pointer), "attribute_not_exists(pk)"))
        for run_id, suspension in writes.checkpoints.items():
            checkpoint, chunks = runtime_items.checkpoint_items(run_id, suspension)
            actions.extend(backend.put(new, "attribute_not_exists(pk)") for new in (checkpoint, *chunks))
        actions.extend(self._seed_actions(written))
        self._action_heads = [heads.get(index) for index in range(len(actions))]
        backend.commit(actions)
        for item_key, item in written.items():
            backend.heads.put(item_key, item)

    def _seed_actions(self, written_heads: dict[ItemKey, dict[str, Any]]) -> list[dict[str, Any]]:
        """Seed heads and attempts under their versions, new declarations and records once.

        Seed heads written go into `written_heads`, kept once committed: the next seed command
        of this process reads their session and published attempt in its first call.
        """
        backend = self._backend
        writes = self.writes
        written: dict[tuple[str, str], tuple[dict[str, Any], SeedAttempt | None]] = {}
        for head in writes.seed_heads.values():
            written[(keys.run_pk(head.run_id), keys.SEED_HEAD)] = (runtime_items.seed_head_item(head), None)
        for state in writes.seed_attempts.values():
            item_key = (keys.run_pk(state.run_id), keys.seed_attempt_sk(state.attempt_id))
            written[item_key] = (runtime_items.seed_attempt_item(state), state)
        actions: list[dict[str, Any]] = []
        for (pk, sk), seen in self._seen_seeds.items():
            if (pk, sk) not in written:
                actions.append(_versioned_check(backend, pk, seen, sk))
        for item_key, (item, attempt) in written.items():
            seen = self._seen_seeds.get(item_key)
            actions.append(_versioned_put(backend, item, seen))
            if item_key[1] == keys.SEED_HEAD:
                written_heads[item_key] = item
            if seen is None and item_key[1] == keys.SEED_HEAD and item["session_id"]["S"]:
                member = runtime_items.seed_member_item(item["session_id"]["S"], item["run_id"]["S"])
                actions.append(backend.put(member, "attribute_not_exists(pk)"))
            # A declaration never changes: it is written with its attempt, once.
            if seen is None and attempt is not None and attempt.declaration is not None:
                declaration, chunks = runtime_items.seed_declaration_items(attempt.declaration)
                actions.extend(backend.put(new, "attribute_not_exists(pk)") for new in (declaration, *chunks))
        for run_id, attempt_id, record in writes.seed_records:
            item, chunks, guard = runtime_items.seed_record_items(run_id, attempt_id, record)
            actions.extend(backend.put(new, "attribute_not_exists(pk)") for new in (item, *chunks, guard))
        return actions


def _seed_attempt_keys(run_id: str, attempt_id: str) -> tuple[ItemKey, ItemKey]:
    """An attempt's item and its declaration's, read together."""
    pk = keys.run_pk(run_id)
    return (pk, keys.seed_attempt_sk(attempt_id)), (pk, keys.seed_declaration_sk(attempt_id))


def _seed_item_keys(reads: Reads) -> list[ItemKey]:
    """The seed heads, attempts (with their declarations) and seed key guards `reads` names."""
    item_keys = [(keys.run_pk(run_id), keys.SEED_HEAD) for run_id in reads.seed_runs]
    for run_id, attempt_id in reads.seed_attempts:
        item_keys.extend(_seed_attempt_keys(run_id, attempt_id))
    item_keys += [(keys.run_pk(run_id), keys.seed_guard_sk(attempt, key)) for run_id, attempt, key in reads.seed_keys]
    return item_keys


def _versioned_put(
    backend: DynamoRuntimeBackend, item: dict[str, Any], seen: int | None, *, old: bool = False
) -> dict[str, Any]:
    item["version"] = n((seen or 0) + 1)
    if seen is None:
        return backend.put(item, "attribute_not_exists(pk)", old=old)
    return backend.put(item, "version = :seen", {":seen": n(seen)}, old=old)


def _live_session_check(backend: DynamoRuntimeBackend, session_id: str) -> dict[str, Any]:
    """The session is there, and neither purging nor purged."""
    return backend.check(
        keys.session_pk(session_id),
        keys.META,
        "attribute_exists(pk) AND NOT #status IN (:purging, :purged)",
        {":purging": s(PURGING), ":purged": s(PURGED)},
        names={"#status": "status"},
    )


def _versioned_check(
    backend: DynamoRuntimeBackend, pk: str, seen: int | None, sk: str = keys.META, *, old: bool = False
) -> dict[str, Any]:
    if seen is None:
        return backend.check(pk, sk, "attribute_not_exists(pk)", old=old)
    return backend.check(pk, sk, "version = :seen", {":seen": n(seen)}, old=old)
