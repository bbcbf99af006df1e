"""Damage stored runtime state at the storage boundary, for the stores a test can reach.

goa-ai's reference tests edit the inmem store's maps to prove that a store
never treats missing or corrupt stored proof as permission; these helpers
make the same edits to the in-memory backend's dictionaries and to the
DynamoDB items. The HTTP client cannot reach stored items: `reachable` says
whether a store can be damaged.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from cairn.dynamodb import keys, runtime_items
from cairn.dynamodb.items import key, s
from cairn.dynamodb.runtime_store import DynamoRuntimeStore
from cairn.runtime import wire
from cairn.runtime.inmem import InMemoryRuntimeStore
from cairn.runtime.model import RunRecord, RunSuspension, SeedDeclaration, SeedKind
from cairn.runtime.seed_rules import operation_of


def reachable(store) -> bool:
    return isinstance(store, InMemoryRuntimeStore | DynamoRuntimeStore)


def record(store, run_id: str, event_key: str) -> RunRecord:
    found = (
        store._backend.record_by_key(run_id, event_key)
        if isinstance(store, DynamoRuntimeStore)
        else (store._backend.record_keys[(run_id, event_key)])
    )
    assert found is not None
    return found


def replace_record(store, original: RunRecord, **changes: Any) -> None:
    """Overwrite a stored record in place (same position), with `changes`."""
    changed = dataclasses.replace(original, **changes)
    backend = store._backend
    if isinstance(store, InMemoryRuntimeStore):
        records = backend.run_records[original.run_id]
        records[int(original.id) - 1] = changed
        backend.record_keys.pop((original.run_id, original.event_key))
        backend.record_keys[(changed.run_id, changed.event_key)] = changed
        return
    item, chunks, guard = runtime_items.record_items(changed)
    for new in (item, *chunks, guard):
        backend._client.put_item(TableName=backend._table, Item=new)


def drop_key(store, run_id: str, event_key: str) -> None:
    """Forget which record an event key names (the record stays, unreachable by key)."""
    backend = store._backend
    if isinstance(store, InMemoryRuntimeStore):
        del backend.record_keys[(run_id, event_key)]
        return
    backend._client.delete_item(TableName=backend._table, Key=key(keys.run_pk(run_id), keys.guard_sk(event_key)))


def edit_run(store, run_id: str, **changes: Any) -> None:
    """Change what the run head binds (`request_digest`, `start_key`, …)."""
    backend = store._backend
    if isinstance(store, InMemoryRuntimeStore):
        for name, value in changes.items():
            setattr(backend.runs[run_id], name, value)
        return
    run = backend.load_run(run_id)
    for name, value in changes.items():
        setattr(run, name, value)
    item = runtime_items.run_item(run)
    item["version"] = {"N": str(run.version)}
    backend._client.put_item(TableName=backend._table, Item=item)


def set_checkpoint(store, run_id: str, checkpoint: RunSuspension | None) -> None:
    backend = store._backend
    if isinstance(store, InMemoryRuntimeStore):
        if checkpoint is None:
            del backend.checkpoints[run_id]
        else:
            backend.checkpoints[run_id] = checkpoint
        return
    if checkpoint is None:
        backend._client.delete_item(TableName=backend._table, Key=key(keys.run_pk(run_id), keys.CHECKPOINT))
        return
    item, chunks = runtime_items.checkpoint_items(run_id, checkpoint)
    for new in (item, *chunks):
        backend._client.put_item(TableName=backend._table, Item=new)


def misdirect_key(store, run_id: str, event_key: str) -> None:
    """Make an event key name a record id that holds nothing."""
    backend = store._backend
    if isinstance(store, InMemoryRuntimeStore):
        backend.record_keys[(run_id, event_key)] = dataclasses.replace(record(store, run_id, event_key), id="")
        return
    guard = {**key(keys.run_pk(run_id), keys.guard_sk(event_key)), "seq": {"N": "999"}, "event_key": {"S": event_key}}
    backend._client.put_item(TableName=backend._table, Item=guard)


def corrupt_seed(store, run_id: str, change: str) -> None:
    """Damage the run's stored publication at the storage boundary, as goa-ai's test does in its maps."""
    if isinstance(store, InMemoryRuntimeStore):
        backend = store._backend
        head = backend.seed_heads[run_id]
        attempt = backend.seed_attempts[(run_id, head.published_attempt)]
        if change == "missing":
            del backend.seed_heads[run_id]
        elif change == "unpublished":
            attempt.published, head.published_attempt = False, ""
        else:
            attempt.declaration = changed_declaration(attempt.declaration, change)
            # The head keeps the publication's owner and summary too: a start reads them there.
            head.operation = operation_of(attempt.declaration)
            assert head.published is not None
            head.published = dataclasses.replace(
                head.published, kind=attempt.declaration.kind, source_run_id=attempt.declaration.source_run_id
            )
        return
    backend = store._backend
    pk = keys.run_pk(run_id)
    head_item = backend.get(pk, keys.SEED_HEAD)
    attempt_id = head_item["published_attempt"]["S"]
    if change == "missing":
        backend._client.delete_item(TableName=backend._table, Key=key(pk, keys.SEED_HEAD))
    elif change == "unpublished":
        backend._client.put_item(TableName=backend._table, Item={**head_item, "published_attempt": s("")})
    else:
        item = backend.get(pk, keys.seed_declaration_sk(attempt_id))
        declaration = changed_declaration(wire.decode(SeedDeclaration, json.loads(item["data"]["B"])), change)
        item, _ = runtime_items.seed_declaration_items(declaration)
        backend._client.put_item(TableName=backend._table, Item=item)
        # The head keeps the publication's owner and summary too: a start reads them there.
        head = runtime_items.seed_head_from_item(head_item)
        head.operation = operation_of(declaration)
        assert head.published is not None
        head.published = dataclasses.replace(
            head.published, kind=declaration.kind, source_run_id=declaration.source_run_id
        )
        changed = {**runtime_items.seed_head_item(head), "version": head_item["version"]}
        backend._client.put_item(TableName=backend._table, Item=changed)


def changed_declaration(declaration: SeedDeclaration, change: str) -> SeedDeclaration:
    if change == "owner":
        return dataclasses.replace(declaration, agent_id="another-agent")
    return dataclasses.replace(declaration, kind=SeedKind.CONTINUATION, source_run_id="another-run")
