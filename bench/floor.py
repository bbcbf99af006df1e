"""DynamoDB calls per operation beside the physical minimum each one could have.

Read off the counted tables (`calls`, `state_calls`, `runtime_calls`,
`integration_calls`), so
every figure here is one measured in the same run. The minimum is what one
operation needs with no read that a condition could replace: one
transaction for a write whose credential and sequence are conditions of it,
one more call where something must be read before anything can be written.
"""

from __future__ import annotations

from typing import Any

from bench.calls import CallCounts
from bench.report import Table

# (table, row label, the minimum). The fresh-process figure is shown where the table has one.
FLOOR: list[tuple[str, str, str]] = [
    ("calls", "provision", "1: the per-IP rate counter and the new head in one transaction"),
    ("calls", "inbox post (new key)", "1: the transaction, the inbox secret a condition of it"),
    ("calls", "poll (wait=0)", "2: credential and rate count in one update returning the head, then the query"),
    ("calls", "ack", "1: the credential a condition of the write"),
    ("state_calls", "write, replace (if_revision N)", "2"),
    ("state_calls", "write, stale if_revision (conflict)", "1"),
    ("state_calls", "batch of 5 sets (if_revision N)", "2"),
    ("runtime_calls", "append_run_record (new key)", "1 in steady state (the writer's own heads)"),
    ("runtime_calls", "append_run_record (new key, fresh process)", "2: one consistent read, then the transaction"),
    ("runtime_calls", "start_root_run", "2"),
    ("runtime_calls", "start_child_run", "2: the runs' and the session's heads in one read, then the transaction"),
    ("runtime_calls", "record_run_terminal (completed)", "1 in steady state (the writer's own run head)"),
    ("runtime_calls", "begin_run_seed", "2: the seed's head, attempt and session in one read, then the transaction"),
    (
        "runtime_calls",
        "append_run_seed (literal)",
        "2: the attempt and the record's key in one read, then the transaction",
    ),
    ("runtime_calls", "publish_run_seed", "2: the seed's head and attempt in one read, then the transaction"),
    (
        "runtime_calls",
        "start_root_run (attaching its seed)",
        "2: the seed's head (with the published attempt's summary) read with the start's heads, then the transaction",
    ),
    (
        "runtime_calls",
        "append_run_seed (literal, fresh process)",
        "2: as in a process that saw the seed, the session unread (its life a condition of the transaction)",
    ),
    (
        "runtime_calls",
        "publish_run_seed (fresh process)",
        "2: as in a process that saw the seed, the session unread (its life a condition of the transaction)",
    ),
    ("runtime_calls", "start_root_run (attaching its seed, fresh process)", "2: as in a process that saw the seed"),
    # The integrations: each SDK call is one request; its reads and its transaction are what it costs.
    (
        "integration_calls",
        "CairnSession.add_items (1 item)",
        "2: the address and the session's head in one BatchGetItem, then the transaction",
    ),
    (
        "integration_calls",
        "CairnSession.pop_item",
        "2: the head and the newest item in one read, then the transaction, the token a condition of it",
    ),
    (
        "integration_calls",
        "CairnSaver.put (continuing the head)",
        "2: the address (whose expiry the checkpoint copies), then the transaction, token and parent its conditions",
    ),
    (
        "integration_calls",
        "CairnSaver.get_tuple (latest)",
        "2: the token (a read cannot be conditioned), then the query",
    ),
    (
        "integration_calls",
        "CairnSessionRepository.create_message (appending)",
        "2: the address (whose expiry the message copies), then the transaction, version and hold its conditions",
    ),
]


def floor_table(tables: dict[str, Table]) -> Table:
    """Calls now (steady state, and a fresh process's first where measured) against the minimum."""
    table = Table(
        "DynamoDB calls per operation: now against the minimum",
        ["operation", "now", "fresh process", "minimum"],
    )
    for source, label, minimum in FLOOR:
        if source not in tables:  # a run of some parts only (`--only`)
            continue
        row = _row(tables[source], label)
        if row is None:
            table.add(label, "(not measured)", "-", minimum)
            continue
        steady = next(value for column, value in row.items() if column.startswith(("steady", "DynamoDB calls")))
        fresh = row.get("first call in a fresh process", "-")
        table.add(label, _total(steady), _total(fresh), minimum)
    table.notes.append("Means of the counted runs above; every DynamoDB call counts, reads and transactions alike.")
    return table


def _row(table: Table, label: str) -> dict[str, Any] | None:
    for row in table.rows:
        if row[0] == label:
            return dict(zip(table.columns, row, strict=True))
    return None


def _total(counts: Any) -> str:
    return f"{counts.total:g}" if isinstance(counts, CallCounts) else str(counts)
