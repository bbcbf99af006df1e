"""LangGraph checkpoints, writes and parts count against their address's storage limit, on moto.

Each write of a thread moves the address's count by what it stores, in its
own transaction; each removal (a thread's deletion, a prune, a deletion by
run) gives back exactly what it removed; a copy counts as what it adds.
"""

from __future__ import annotations

import base64
import hashlib
import os
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config, generate_metadata

from cairn.client import Address, HttpClient
from cairn.dynamodb import checkpoint_table, keys
from cairn.dynamodb.client import make_client
from cairn.dynamodb.items import key
from cairn.errors import StorageLimitExceeded
from cairn.integrations.langgraph import CairnSaver
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, Reply
from tests.support.storage_usage import counted, counted_items

SIZE = 3_000


def on_moto(clock: FakeClock, limit: int) -> tuple[LambdaClient, Address]:
    api = LambdaClient.on_moto(clock, storage_max_bytes=limit)
    return api, Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))


def put(api: LambdaClient, address: Address, thread_id: str, data: bytes, **body: Any) -> Reply:
    body = {"thread_id": thread_id, "checkpoint_id": "c-1", **body}
    body["checkpoint"] = {"type": "bytes", "data": base64.b64encode(data).decode()}
    return api.request("POST", f"/api/v1/addresses/{address.id}/checkpoints", json_body=body, token=address.read_token)


def usage(api: LambdaClient, address: Address) -> int:
    """The address's count, checked against what its stored items say they count."""
    used = counted(api.services.settings, address.id)
    assert used == counted_items(api.services.settings, address.id)
    return used


def test_checkpoints_fill_the_limit_exactly_and_a_put_past_it_stores_nothing(moto_env: None, clock: FakeClock):
    roomy, address = on_moto(clock, 10_000_000)
    assert put(roomy, address, "t0", b"x" * SIZE).status == 201
    cost = usage(roomy, address)
    assert SIZE + 128 < cost < SIZE + 400  # the value, its ids and metadata, and its row

    api, address = on_moto(clock, 3 * cost - 1)
    assert [put(api, address, thread, b"x" * SIZE).status for thread in ("t1", "t2")] == [201, 201]
    refused = put(api, address, "t3", b"x" * SIZE)

    assert refused.status == 413
    assert refused.json()["error"]["code"] == "storage_limit_exceeded"
    error = refused.json()["error"]
    assert {name: error[name] for name in ("max_bytes", "used_bytes", "needed_bytes")} == {
        "max_bytes": 3 * cost - 1,
        "used_bytes": 2 * cost,
        "needed_bytes": cost,
    }
    assert usage(api, address) == 2 * cost
    assert list(CairnSaver(address).list(generate_config("t3"))) == []
    # A checkpoint one byte smaller fits exactly.
    assert put(api, address, "t3", b"x" * (SIZE - 1)).status == 201
    assert usage(api, address) == 3 * cost - 1


def test_the_saver_raises_storage_limit_exceeded_and_its_thread_stays_as_it_was(moto_env: None, clock: FakeClock):
    api, address = on_moto(clock, 60_000)
    cairn = CairnSaver(address)
    first = generate_checkpoint(channel_values={"v": os.urandom(30_000)}, channel_versions={"v": 1})
    config = cairn.put(generate_config("full"), first, generate_metadata(), {"v": 1})

    with pytest.raises(StorageLimitExceeded) as refused:
        second = generate_checkpoint(channel_values={"v": os.urandom(40_000)}, channel_versions={"v": 2})
        cairn.put(config, second, generate_metadata(step=1), {"v": 2})

    assert refused.value.details["max_bytes"] == 60_000
    assert [found.config for found in cairn.list(generate_config("full"))] == [config]
    assert usage(api, address) == refused.value.details["used_bytes"]


def test_writes_and_parts_count_and_a_special_write_replaced_counts_once(moto_env: None, clock: FakeClock):
    api, address = on_moto(clock, 10_000_000)
    cairn = CairnSaver(address)
    config = cairn.put(generate_config("w"), generate_checkpoint(), generate_metadata(), {})
    alone = usage(api, address)

    cairn.put_writes(config, [("a", os.urandom(5_000)), ("b", os.urandom(5_000))], "task")
    with_writes = usage(api, address)
    cairn.put_writes(config, [("__error__", os.urandom(20_000))], "task")
    with_error = usage(api, address)
    cairn.put_writes(config, [("__error__", os.urandom(1_000))], "task")  # replaces it
    replaced = usage(api, address)
    # Larger than an inline value: uploaded as a part, which counts its bytes and its pieces.
    large = generate_checkpoint(channel_values={"big": os.urandom(900_000)}, channel_versions={"big": 1})
    cairn.put(config, large, generate_metadata(step=1), {"big": 1})
    with_part = usage(api, address)

    assert alone < with_writes - 10_000 < alone + 1_000
    assert with_writes + 20_000 < with_error < with_writes + 21_000
    assert with_writes + 1_000 < replaced < with_writes + 2_000
    assert with_part > replaced + 900_000
    cairn.delete_thread("w")
    assert usage(api, address) == 0


def test_prunes_deletions_by_run_and_copies_move_the_count_by_what_they_remove_or_add(moto_env: None, clock: FakeClock):
    api, address = on_moto(clock, 10_000_000)
    cairn = CairnSaver(address)
    config = generate_config("source")
    for step in range(6):
        checkpoint = generate_checkpoint(channel_values={"v": os.urandom(4_000)}, channel_versions={"v": step + 1})
        config = cairn.put(config, checkpoint, generate_metadata(step=step, run_id=f"run-{step % 2}"), {"v": step + 1})
        cairn.put_writes(config, [("v", os.urandom(2_000))], f"task-{step}")
    source = usage(api, address)

    cairn.copy_thread("source", "target")
    copied = usage(api, address)
    cairn.delete_for_runs(["run-0"])
    by_run = usage(api, address)
    cairn.prune(["source", "target"], strategy="keep_latest")
    pruned = usage(api, address)

    # The copy's ids are as long as its source's but for the thread's name: it counts about as much again.
    assert 2 * source - 200 < copied < 2 * source + 200
    assert copied - by_run > copied // 3  # three of six checkpoints in each thread, with their writes
    assert 0 < pruned < by_run
    for thread in ("source", "target"):
        cairn.delete_thread(thread)
    assert usage(api, address) == 0


def big(step: int) -> dict[str, Any]:
    """A checkpoint whose value is over the inline limit: it travels and is kept as a part."""
    return generate_checkpoint(channel_values={"v": bytes([step]) * 300_000}, channel_versions={"v": step + 1})


def test_a_prune_removes_the_parts_nothing_has_named_for_five_minutes_and_gives_their_room_back(
    moto_env: None, clock: FakeClock
):
    api, address = on_moto(clock, 10_000_000)
    cairn = CairnSaver(address)
    config = generate_config("parts")
    for step in range(3):
        config = cairn.put(config, big(step), generate_metadata(step=step), {"v": step + 1})
    cairn.prune(["parts"])
    pruned = usage(api, address)
    assert pruned > 3 * 300_000  # the two checkpoints dropped, their parts not yet

    clock.advance(checkpoint_table.ORPHAN_SECONDS - 1)
    cairn.prune(["parts"])
    assert usage(api, address) == pruned
    clock.advance(1)
    cairn.prune(["parts"])

    assert 300_000 < usage(api, address) < pruned - 2 * 300_000
    latest = cairn.get_tuple(generate_config("parts"))
    assert latest is not None and latest.checkpoint["channel_values"]["v"] == bytes([2]) * 300_000


def test_a_part_found_unnamed_is_named_again_only_once_uploaded_again_and_then_stays(moto_env: None, clock: FakeClock):
    api, address = on_moto(clock, 10_000_000)
    cairn = CairnSaver(address)
    data = os.urandom(1_000)
    digest = hashlib.sha256(data).hexdigest()
    url = f"/api/v1/addresses/{address.id}/checkpoints/parts/{digest}"
    upload = {"thread_id": "late", "data": base64.b64encode(data).decode()}
    assert api.request("PUT", url, json_body=upload, token=address.read_token).status in (200, 201)
    cairn.prune(["late"])  # the part is named by nothing yet: the prune marks it
    naming = {
        "thread_id": "late",
        "checkpoint_id": "c-1",
        "checkpoint": {"type": "bytes", "parts": [digest], "size": 1_000},
    }

    refused = api.request(
        "POST", f"/api/v1/addresses/{address.id}/checkpoints", json_body=naming, token=address.read_token
    )
    assert (refused.status, refused.error_code) == (409, "checkpoint_part_missing")
    assert api.request("PUT", url, json_body=upload, token=address.read_token).status in (200, 201)
    stored = api.request(
        "POST", f"/api/v1/addresses/{address.id}/checkpoints", json_body=naming, token=address.read_token
    )
    assert stored.status == 201

    clock.advance(checkpoint_table.ORPHAN_SECONDS)
    cairn.prune(["late"])
    kept = api.request("GET", f"{url}?thread_id=late", token=address.read_token)
    assert kept.status == 200 and base64.b64decode(kept.json()["data"]) == data


def test_a_saver_whose_parts_a_prune_found_unnamed_before_its_put_uploads_them_again_and_commits(
    moto_env: None, clock: FakeClock
):
    api, address = on_moto(clock, 10_000_000)
    pruner = CairnSaver(address)

    class RacedSaver(CairnSaver):
        """Its next request waits for a prune of the thread: after the parts' upload, before the put naming them."""

        raced = False

        def _post(self, path: str, request: dict[str, Any]) -> dict[str, Any]:
            if not self.raced:
                self.raced = True
                pruner.prune(["raced"])
            return super()._post(path, request)

    cairn = RacedSaver(address)
    config = cairn.put(generate_config("raced"), big(1), generate_metadata(step=1), {"v": 2})
    cairn.raced = False
    cairn.put_writes(config, [("v", b"w" * 100_000)], "task")

    found = cairn.get_tuple(config)
    assert found is not None and found.checkpoint["channel_values"]["v"] == bytes([1]) * 300_000
    assert found.pending_writes == [("task", "v", b"w" * 100_000)]


def test_deletions_racing_their_addresss_deletion_do_not_make_its_count_again(moto_env: None, clock: FakeClock):
    """An address's deletion removes its count and then the rest; a deletion that passed its check before
    finds the count gone and leaves what is left to it, rather than making a count below zero that no
    expiry would ever remove."""
    api, address = on_moto(clock, 10_000_000)
    cairn = CairnSaver(address)
    for thread in ("by-thread", "by-run"):
        config = generate_config(thread)
        for step in range(3):
            checkpoint = generate_checkpoint(channel_values={"v": os.urandom(1_000)}, channel_versions={"v": step + 1})
            config = cairn.put(config, checkpoint, generate_metadata(step=step, run_id=f"run-{thread}"), {"v": 1})
            cairn.put_writes(config, [("v", os.urandom(500))], f"task-{step}")
    assert usage(api, address) > 0
    settings = api.services.settings
    count = key(keys.address_pk(address.id), keys.STORAGE_USAGE)
    make_client(settings).delete_item(TableName=settings.table_name, Key=count)  # the address's deletion began

    cairn.delete_thread("by-thread")
    cairn.delete_for_runs(["run-by-run"])

    found = make_client(settings).get_item(TableName=settings.table_name, Key=count, ConsistentRead=True)
    assert "Item" not in found
