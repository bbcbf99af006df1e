"""Checkpoint routes and `CairnSaver` through the Lambda resolver, on moto: paging, parts, retries, limits."""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config, generate_metadata

from cairn.checkpoints import threads
from cairn.client import Address, HttpClient
from cairn.integrations.langgraph import CairnSaver, saver
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient


@pytest.fixture
def api(moto_env: None, clock: FakeClock) -> LambdaClient:
    return LambdaClient.on_moto(clock)


@pytest.fixture
def address(api: LambdaClient) -> Address:
    return Address(api.provision(), http=HttpClient(transport=httpx.MockTransport(api.handle)))


def base(address: Address) -> str:
    return f"/api/v1/addresses/{address.id}/checkpoints"


def test_the_saver_sends_within_the_servers_limits():
    assert saver.MAX_INLINE_CHECKPOINT_BYTES == threads.MAX_INLINE_CHECKPOINT_BYTES
    assert saver.MAX_INLINE_WRITE_BYTES == threads.MAX_INLINE_WRITE_BYTES
    assert saver.PART_BYTES == threads.PART_BYTES
    assert saver.MAX_WRITES == threads.MAX_WRITES
    assert saver.MAX_ACTIONS == threads.MAX_ACTIONS


def test_a_put_sent_again_after_it_committed_answers_the_same(api: LambdaClient, address: Address):
    first = CairnSaver(address).put(generate_config("retry"), generate_checkpoint(), generate_metadata(), {})
    body = {"thread_id": "retry", "checkpoint_id": "c-2", "parent_id": first["configurable"]["checkpoint_id"]}
    body["checkpoint"] = {"type": "bytes", "data": "eA=="}

    answers = [api.request("POST", base(address), json_body=body, token=address.read_token) for _ in range(2)]

    assert [answer.status for answer in answers] == [201, 201]
    assert [found["checkpoint_id"] for found in search(api, address, thread_id="retry")["checkpoints"]][0] == "c-2"
    assert len(search(api, address, thread_id="retry")["checkpoints"]) == 2


def search(api: LambdaClient, address: Address, **body: Any) -> dict[str, Any]:
    reply = api.request("POST", base(address) + "/search", json_body=body, token=address.read_token)
    assert reply.status == 200, reply.text
    return reply.json()


def test_a_long_thread_is_answered_a_page_at_a_time_and_listed_whole(api: LambdaClient, address: Address):
    cairn = CairnSaver(address)
    config = generate_config("long")
    values = [os.urandom(200_000) for _ in range(24)]
    for step, value in enumerate(values):
        checkpoint = generate_checkpoint(channel_values={"v": value}, channel_versions={"v": step + 1})
        config = cairn.put(config, checkpoint, generate_metadata(step=step), {"v": step + 1})

    first = search(api, address, thread_id="long", checkpoint_ns="")

    assert 1 <= len(first["checkpoints"]) < len(values) and first["next"]
    listed = list(cairn.list(generate_config("long")))
    assert [found.checkpoint["channel_values"]["v"] for found in listed] == list(reversed(values))
    assert [found.metadata["step"] for found in cairn.list(generate_config("long"), limit=15)] == list(range(23, 8, -1))


def test_writes_that_do_not_fit_one_answer_are_read_after_it(api: LambdaClient, address: Address):
    cairn = CairnSaver(address)
    stored = cairn.put(generate_config("writes"), generate_checkpoint(), generate_metadata(), {})
    values = [os.urandom(threads.MAX_INLINE_WRITE_BYTES - 64) for _ in range(100)]
    cairn.put_writes(stored, [(f"ch{index}", value) for index, value in enumerate(values)], "task")

    answer = search(
        api, address, thread_id="writes", checkpoint_ns="", checkpoint_id=stored["configurable"]["checkpoint_id"]
    )
    assert answer["checkpoints"][0]["more_writes"]
    assert len(answer["checkpoints"][0]["writes"]) < len(values)

    found = cairn.get_tuple(stored)
    assert found is not None
    assert found.pending_writes == [("task", f"ch{index}", value) for index, value in enumerate(values)]


def test_a_checkpoint_naming_a_part_never_uploaded_is_refused_and_not_stored(api: LambdaClient, address: Address):
    body = {
        "thread_id": "parts",
        "checkpoint_id": "c-1",
        "checkpoint": {"type": "bytes", "parts": ["a" * 64], "size": 5},
    }

    reply = api.request("POST", base(address), json_body=body, token=address.read_token)

    assert (reply.status, reply.error_code) == (409, "checkpoint_part_missing")
    assert reply.json()["error"]["parts"] == ["a" * 64]
    assert search(api, address)["checkpoints"] == []


def test_writes_naming_a_part_never_uploaded_are_refused_and_not_stored(api: LambdaClient, address: Address):
    stored = CairnSaver(address).put(generate_config("parts"), generate_checkpoint(), generate_metadata(), {})
    value = {"type": "bytes", "parts": ["b" * 64], "size": 9}
    body = {
        "thread_id": "parts",
        "checkpoint_id": stored["configurable"]["checkpoint_id"],
        "task_id": "task",
        "writes": [
            {"idx": 0, "channel": "ch", "value": value},
            {"idx": 1, "channel": "ok", "value": {"type": "null", "data": ""}},
        ],
    }

    reply = api.request("POST", base(address) + "/writes", json_body=body, token=address.read_token)

    assert (reply.status, reply.error_code) == (409, "checkpoint_part_missing")
    assert search(api, address, thread_id="parts")["checkpoints"][0]["writes"] == []


def test_a_write_is_kept_once_under_its_task_and_index_and_special_ones_are_replaced(address: Address):
    cairn = CairnSaver(address)
    stored = cairn.put(generate_config("once"), generate_checkpoint(), generate_metadata(), {})

    cairn.put_writes(stored, [("ch", "first"), ("__error__", "boom")], "task")
    cairn.put_writes(stored, [("ch", "second"), ("__error__", "again")], "task")

    found = cairn.get_tuple(stored)
    assert found is not None
    assert sorted(found.pending_writes) == [("task", "__error__", "again"), ("task", "ch", "first")]


def test_deleting_a_thread_removes_its_parts_too(api: LambdaClient, address: Address):
    cairn = CairnSaver(address)
    large = os.urandom(threads.PART_BYTES + 10)
    stored = cairn.put(
        generate_config("gone"), generate_checkpoint(channel_values={"v": large}), generate_metadata(), {}
    )
    parts = search(api, address, thread_id="gone")["checkpoints"][0]["checkpoint"]["parts"]
    assert len(parts) == 2 and cairn.get_tuple(stored).checkpoint["channel_values"]["v"] == large

    cairn.delete_thread("gone")

    for digest in parts:
        reply = api.request("GET", f"{base(address)}/parts/{digest}?thread_id=gone", token=address.read_token)
        assert (reply.status, reply.error_code) == (404, "not_found")
    assert cairn.get_tuple(generate_config("gone")) is None
