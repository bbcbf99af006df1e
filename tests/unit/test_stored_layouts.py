"""Items written in any earlier layout still read back: large payloads byte for byte, surfaces decided.

Address events, memory events, run records and checkpoints each used their
own place for the pieces of a large payload; new writes share one layout
(`cairn.dynamodb.blobs`). Items are written here as the earlier code wrote
them, and read through today's stores.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from cairn import credentials
from cairn.addresses.models import AddressRecord, NewEvent
from cairn.addresses.ports import AppendRequest
from cairn.dynamodb import blobs
from cairn.dynamodb.address_table import AddressTable
from cairn.dynamodb.client import make_client
from cairn.dynamodb.items import b, key, n, s
from cairn.dynamodb.memory_table import MemoryTable
from cairn.dynamodb.runtime_backend import DynamoRuntimeBackend
from cairn.dynamodb.table import ensure_table
from cairn.settings import Settings
from cairn.transcript.memory import MemoryEvent

TABLE = "cairn-layouts"
PIECE = 350_000


@pytest.fixture
def client(moto_env):
    client = make_client(Settings())
    ensure_table(client, TABLE)
    return client


def put(client, *items: dict) -> None:
    for item in items:
        client.put_item(TableName=TABLE, Item=item)


def pieces(pk: str, sks: list[str], data: bytes) -> list[dict]:
    return [{**key(pk, sk), "data": b(data[index * PIECE : (index + 1) * PIECE])} for index, sk in enumerate(sks)]


def large_json() -> str:
    """About 630 KB of UTF-8: two pieces, cut inside a character."""
    return json.dumps({"text": "é🙂x" * 90_000}, separators=(",", ":"), ensure_ascii=False)


def test_address_events_with_pieces_at_c_seq(client) -> None:
    now = time.time()
    table = AddressTable(client, TABLE, retention_seconds=3600, max_events=100)
    address_id = credentials.new_address_id()
    table.create(AddressRecord(address_id, None, None, "x@example.test", now, None, "r", "i"))
    data = large_json().encode()
    pk = f"A#{address_id}"
    put(
        client,
        {
            **key(pk, "E#000000000001"),
            "event_id": s("evt_1_a"),
            "seq": n(1),
            "type": s("t"),
            "source": s("http"),
            "created_at": n(now),
            "expires_at": n(int(now) + 3600),
            "data_chunks": n(2),
        },
        *pieces(pk, ["C#000000000001#000", "C#000000000001#001"], data),
    )
    client.update_item(
        TableName=TABLE,
        Key=key(pk, "META"),
        UpdateExpression="SET last_seq = :one",
        ExpressionAttributeValues={":one": n(1)},
    )

    assert table.load_event(address_id, 1, now=now).data_json == data.decode()
    # A new large event beside it uses today's layout; both read back.
    table.append(AppendRequest(address_id, [NewEvent("t", "http", data.decode(), "http")], None, now))
    page = table.list_events(address_id, after=0, limit=10, now=now, max_bytes=10_000_000)
    assert [event.data_json for event in page.events] == [data.decode(), data.decode()]


def test_address_events_stored_before_surfaces_read_with_the_surface_their_labels_allow(client) -> None:
    now = time.time()
    table = AddressTable(client, TABLE, retention_seconds=3600, max_events=100)
    address_id = credentials.new_address_id()
    table.create(AddressRecord(address_id, None, None, "x@example.test", now, None, "r", "i"))
    pk = f"A#{address_id}"
    labels = [("state.updated", "state"), ("email.received", "email"), ("render.completed", "renderer")]
    put(
        client,
        *(
            {
                **key(pk, f"E#{sequence:012d}"),
                "event_id": s(f"evt_{sequence}_a"),
                "seq": n(sequence),
                "type": s(type_),
                "source": s(source),
                "created_at": n(now),
                "expires_at": n(int(now) + 3600),
                "data": s("{}"),
            }
            for sequence, (type_, source) in enumerate(labels, start=1)
        ),
    )
    client.update_item(
        TableName=TABLE,
        Key=key(pk, "META"),
        UpdateExpression="SET last_seq = :n",
        ExpressionAttributeValues={":n": n(len(labels))},
    )

    page = table.list_events(address_id, after=0, limit=10, now=now, max_bytes=10_000_000)
    # Mail stored then could have been an inbox post with the same labels: it proves nothing.
    assert [event.ingress_surface for event in page.events] == ["state", "http", "http"]
    loaded = table.load_event(address_id, 2, now=now)
    assert loaded is not None and loaded.ingress_surface == "http"


def test_memory_events_with_pieces_after_the_event(client) -> None:
    table = MemoryTable(client, TABLE)
    data = large_json().encode()
    pk = "M#agent#run"
    put(
        client,
        {**key(pk, "META"), "last_seq": n(1)},
        {
            **key(pk, "E#000000000001"),
            "seq": n(1),
            "type": s("planner_note"),
            "ts": n(1_700_000_000_000),
            "labels": s("{}"),
            "chunks": n(2),
        },
        *pieces(pk, ["E#000000000001#000", "E#000000000001#001"], data),
    )
    table.append("agent", "run", [MemoryEvent("planner_note", datetime.now(UTC), {"note": "small"})])
    page = table.list_events("agent", "run", after=0, limit=None, max_bytes=None)
    assert [event.sequence for event in page.events] == [1, 2]
    assert page.events[0].data == json.loads(data)
    assert page.events[1].data == {"note": "small"}


def test_run_records_and_checkpoints_with_their_own_pieces(client) -> None:
    backend = DynamoRuntimeBackend(client, TABLE)
    payload = bytes(range(256)) * 3_000
    pk = "R#run-1"
    put(
        client,
        {
            **key(pk, "E#000000000001"),
            "seq": n(1),
            "event_key": s("k"),
            "run_id": s("run-1"),
            "agent_id": s("a"),
            "session_id": s(""),
            "turn_id": s(""),
            "type": s("note"),
            "ts": n(1_700_000_000_000),
            "chunks": n(3),
        },
        *pieces(pk, ["C#000000000001#000", "C#000000000001#001", "C#000000000001#002"], payload),
        {**key(pk, "CKPT"), "suspension_id": s("susp-1"), "chunks": n(3)},
        *pieces(pk, ["CK#000", "CK#001", "CK#002"], payload),
    )
    (record,) = backend.records("run-1", 0)
    assert record.payload == payload and record.event_key == "k"
    checkpoint = backend.load_checkpoint("run-1")
    assert checkpoint is not None and checkpoint.id == "susp-1" and checkpoint.data == payload


def test_an_item_whose_key_begins_anothers_reads_its_own_pieces_alone(client) -> None:
    """A Strands agent's head (its state in pieces) and its messages, whose keys the head's begins."""
    pk = "A#addr_layouts"
    payloads = {"STS#s#A#agent": b"s" * 800_000, "STS#s#A#agent#M#000000000000": b"m" * 700_000}
    for sk, data in payloads.items():
        payload, chunks = blobs.split(pk, sk, data)
        put(client, {**key(pk, sk), **payload}, *chunks)

    for sk, data in payloads.items():
        item = client.get_item(TableName=TABLE, Key=key(pk, sk))["Item"]
        assert blobs.read(client, TABLE, item, legacy_prefix="unused") == data
