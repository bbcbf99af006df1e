"""Checkpoint routes and `CairnSaver` through the Lambda resolver, on moto: paging, parts, retries, limits."""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config, generate_metadata

from cairn.checkpoints import threads
from cairn.client import Address, HttpClient
from cairn.integrations.langgraph import CairnSaver, CheckpointStale, CheckpointThreadExists, saver
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LAMBDA_ANSWER_LIMIT, LambdaClient


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
    assert saver.MAX_PARTS == threads.MAX_PARTS
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


def test_pages_of_text_that_escapes_large_fit_a_lambda_answer_and_list_every_checkpoint(
    api: LambdaClient, address: Address
):
    """Namespaces and metadata count as Lambda writes them (7 bytes a "界"): 45 such checkpoints once made
    one 7.5 MB answer, which Lambda cannot return, so the thread's history stopped listing."""
    namespace, parent, stored = "界" * 2048, None, []
    for step in range(45):
        body = {"thread_id": "t", "checkpoint_ns": namespace, "checkpoint_id": f"1ef{step:05}", "parent_id": parent}
        body |= {"checkpoint": {"type": "json", "data": "e30="}, "metadata": {"m": "界" * 21_800}}
        assert api.request("POST", base(address), json_body=body, token=address.read_token).status == 201
        parent = body["checkpoint_id"]
        stored.append(parent)
    listed, after, pages = [], None, 0
    while True:
        query = {"thread_id": "t", **({"after": after} if after else {})}
        reply, size = api.sent("POST", base(address) + "/search", json_body=query, token=address.read_token)
        assert reply.status == 200 and size < LAMBDA_ANSWER_LIMIT
        listed += [found["checkpoint_id"] for found in reply.json()["checkpoints"]]
        pages += 1
        if not (after := reply.json()["next"]):
            break
    assert listed == list(reversed(stored)) and pages > 1, "nothing lost, nothing repeated"


def test_writes_that_do_not_fit_one_answer_are_read_after_it(api: LambdaClient, address: Address):
    cairn = CairnSaver(address)
    stored = cairn.put(generate_config("writes"), generate_checkpoint(), generate_metadata(), {})
    values = [os.urandom(threads.MAX_INLINE_WRITE_BYTES - 64) for _ in range(100)]
    # Two tasks of 50 writes, each task's in one commit.
    tasks = [f"task{index // 50}" for index in range(len(values))]
    for task in ("task0", "task1"):
        writes = [(f"ch{index}", value) for index, value in enumerate(values) if tasks[index] == task]
        cairn.put_writes(stored, writes, task)

    answer = search(
        api, address, thread_id="writes", checkpoint_ns="", checkpoint_id=stored["configurable"]["checkpoint_id"]
    )
    assert answer["checkpoints"][0]["more_writes"]
    assert len(answer["checkpoints"][0]["writes"]) < len(values)

    found = cairn.get_tuple(stored)
    assert found is not None
    assert sorted(found.pending_writes) == sorted(zip(tasks, (f"ch{i}" for i in range(100)), values, strict=True))


@pytest.mark.parametrize("size", [8, threads.MAX_INLINE_WRITE_BYTES], ids=["small", "inline-sized"])
def test_a_tasks_writes_more_than_one_commit_holds_land_in_one_and_read_back_as_they_were(
    api: LambdaClient, address: Address, size: int
):
    """A map step's hundreds of `Send`s: stored in part, LangGraph would resume the task as finished with only
    those. They travel as one write, in one request (uploaded as parts when large), and read back as each."""
    requests: list[str] = []

    def counting(request: httpx.Request) -> httpx.Response:
        requests.append(f"{request.method} {request.url.path.rsplit('/', 1)[-1]}")
        return api.handle(request)

    counted = Address.from_json(address.to_json(), http=HttpClient(transport=httpx.MockTransport(counting)))
    cairn = CairnSaver(counted)
    stored = cairn.put(generate_config("map"), generate_checkpoint(), generate_metadata(), {})
    writes = [("__interrupt__", "asked"), *((f"ch{index % 7}", os.urandom(size)) for index in range(150))]
    requests.clear()

    cairn.put_writes(stored, writes, "task")
    cairn.put_writes(stored, writes, "task")  # sent again: nothing twice

    assert requests.count("POST writes") == 2
    uploads = sum(request.startswith("PUT ") for request in requests)
    assert uploads > 0 if size > 8 else uploads == 0
    found = cairn.get_tuple(stored)
    assert found is not None
    assert found.pending_writes == [("task", channel, value) for channel, value in writes]
    assert len(search(api, address, thread_id="map")["checkpoints"][0]["writes"]) == 2


def test_writes_larger_in_all_than_one_value_holds_go_in_several_commits_rather_than_be_refused(
    api: LambdaClient, address: Address, monkeypatch: pytest.MonkeyPatch
):
    # Here one value holds 3 parts (6 MiB) and the writes take 4.
    monkeypatch.setattr(saver, "MAX_PARTS", 3)
    cairn = CairnSaver(address)
    stored = cairn.put(generate_config("huge"), generate_checkpoint(), generate_metadata(), {})
    writes = [(f"ch{index}", os.urandom(threads.MAX_INLINE_WRITE_BYTES)) for index in range(150)]

    cairn.put_writes(stored, writes, "task")

    found = cairn.get_tuple(stored)
    assert found is not None
    assert found.pending_writes == [("task", channel, value) for channel, value in writes]
    assert search(api, address, thread_id="huge")["checkpoints"][0]["writes"][0]["channel"] == "ch0"  # each its own


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


# -- copy, prune and deletion by run -------------------------------------------


def checkpoint_ids(cairn: CairnSaver, thread_id: str, checkpoint_ns: str | None = None) -> list[str]:
    config = (
        generate_config(thread_id) if checkpoint_ns is None else generate_config(thread_id, checkpoint_ns=checkpoint_ns)
    )
    return [found.config["configurable"]["checkpoint_id"] for found in cairn.list(config)]


def chain(cairn: CairnSaver, thread_id: str, steps: int, **metadata: Any) -> list[dict[str, Any]]:
    configs, config = [], generate_config(thread_id)
    for step in range(steps):
        config = cairn.put(config, generate_checkpoint(), generate_metadata(step=step, **metadata), {})
        configs.append(config)
    return configs


def test_a_copied_thread_has_every_checkpoint_write_and_part_and_outlives_its_source(
    api: LambdaClient, address: Address
):
    cairn = CairnSaver(address)
    large = os.urandom(threads.PART_BYTES + 10)
    first = cairn.put(generate_config("src"), generate_checkpoint(), generate_metadata(step=0), {})
    head = cairn.put(first, generate_checkpoint(channel_values={"v": large}), generate_metadata(step=1), {})
    cairn.put_writes(head, [("ch", large[:100_000])], "task")

    cairn.copy_thread("src", "dst")
    cairn.delete_thread("src")

    copied = cairn.get_tuple(generate_config("dst"))
    assert copied is not None and copied.checkpoint["channel_values"]["v"] == large
    assert copied.pending_writes == [("task", "ch", large[:100_000])]
    assert checkpoint_ids(cairn, "dst") == [
        head["configurable"]["checkpoint_id"],
        first["configurable"]["checkpoint_id"],
    ]
    # The copy's head is its newest checkpoint: a writer continues it, and one continuing an older one is refused.
    cairn.put(copied.config, generate_checkpoint(), generate_metadata(step=2), {})
    stale = generate_config("dst", checkpoint_id=first["configurable"]["checkpoint_id"])
    with pytest.raises(CheckpointStale):
        cairn.put(stale, generate_checkpoint(), generate_metadata(step=2), {})


def test_a_copy_onto_a_thread_with_checkpoints_or_onto_itself_is_refused_and_changes_nothing(
    api: LambdaClient, address: Address
):
    cairn = CairnSaver(address)
    chain(cairn, "from", 2)
    chain(cairn, "busy", 1)
    before = checkpoint_ids(cairn, "busy")

    onto_busy = {"source_thread_id": "from", "target_thread_id": "busy"}
    reply = api.request("POST", base(address) + "/copy", json_body=onto_busy, token=address.read_token)
    assert (reply.status, reply.error_code) == (409, "checkpoint_thread_exists")
    with pytest.raises(CheckpointThreadExists):
        cairn.copy_thread("from", "busy")
    onto_itself = {"source_thread_id": "from", "target_thread_id": "from"}
    reply = api.request("POST", base(address) + "/copy", json_body=onto_itself, token=address.read_token)
    assert (reply.status, reply.error_code) == (400, "invalid_request")

    assert checkpoint_ids(cairn, "busy") == before
    assert len(checkpoint_ids(cairn, "from")) == 2


def test_a_copy_sent_again_after_it_committed_changes_nothing(address: Address):
    cairn = CairnSaver(address)
    chain(cairn, "again", 3)

    cairn.copy_thread("again", "again-copy")
    cairn.copy_thread("again", "again-copy")

    assert checkpoint_ids(cairn, "again-copy") == checkpoint_ids(cairn, "again")


def test_keep_latest_leaves_the_head_with_its_writes_and_parts_readable(address: Address):
    cairn = CairnSaver(address)
    large = os.urandom(threads.PART_BYTES + 10)
    configs = chain(cairn, "pruned", 3)
    head = cairn.put(configs[-1], generate_checkpoint(channel_values={"v": large}), generate_metadata(step=3), {})
    cairn.put_writes(head, [("ch", "kept")], "task")

    cairn.prune(["pruned"])

    assert checkpoint_ids(cairn, "pruned") == [head["configurable"]["checkpoint_id"]]
    kept = cairn.get_tuple(generate_config("pruned"))
    assert kept is not None and kept.checkpoint["channel_values"]["v"] == large
    assert kept.pending_writes == [("task", "ch", "kept")]
    cairn.put(head, generate_checkpoint(), generate_metadata(step=4), {})  # the head is still the head


def delta_chain(
    cairn: CairnSaver, thread_id: str, counters: list[dict[str, list[int]]], runs: dict[int, str] | None = None
) -> list[str]:
    """A checkpoint for each step, its metadata naming the `DeltaChannel`s not stored whole (as LangGraph's does)."""
    ids, config = [], generate_config(thread_id)
    for step, waiting in enumerate(counters):
        extra: dict[str, Any] = {"counters_since_delta_snapshot": waiting} if waiting else {}
        extra.update({"run_id": (runs or {})[step]} if step in (runs or {}) else {})
        config = cairn.put(config, generate_checkpoint(), generate_metadata(step=step, **extra), {})
        ids.append(config["configurable"]["checkpoint_id"])
    return ids


def test_keep_latest_keeps_the_ancestors_back_to_every_delta_channels_full_value(address: Address):
    cairn = CairnSaver(address)
    # `a` is stored whole at steps 1 and 3, `b` at step 1 only.
    ids = delta_chain(cairn, "deltas", [{"a": [1, 1], "b": [1, 1]}, {}, {"a": [1, 1], "b": [1, 1]}, {"b": [2, 2]},
                                        {"a": [1, 1], "b": [3, 3]}])  # fmt: skip
    config = generate_config("deltas", checkpoint_ns="child")
    for step in range(3):  # a namespace of plain checkpoints beside it keeps only its newest
        config = cairn.put(config, generate_checkpoint(), generate_metadata(step=step), {})

    cairn.prune(["deltas"])

    assert checkpoint_ids(cairn, "deltas", "") == ids[:0:-1]
    assert checkpoint_ids(cairn, "deltas", "child") == [config["configurable"]["checkpoint_id"]]


def test_keep_latest_walks_back_no_further_than_a_parent_already_gone(address: Address):
    cairn = CairnSaver(address)
    ids = delta_chain(cairn, "gap", [{"a": [1, 1]}, {"a": [2, 2]}, {"a": [3, 3]}, {"a": [4, 4]}], runs={1: "gone"})
    cairn.delete_for_runs(["gone"])

    cairn.prune(["gap"])

    assert checkpoint_ids(cairn, "gap") == [ids[3], ids[2]]


def test_deleting_a_runs_head_moves_the_head_to_the_newest_checkpoint_kept(address: Address):
    cairn = CairnSaver(address)
    kept = chain(cairn, "runs", 2, run_id="keep")
    dropped = cairn.put(kept[-1], generate_checkpoint(), generate_metadata(run_id="drop"), {})

    cairn.delete_for_runs(["drop", "never-ran"])

    assert checkpoint_ids(cairn, "runs") == [config["configurable"]["checkpoint_id"] for config in reversed(kept)]
    with pytest.raises(CheckpointStale) as refusal:
        cairn.put(dropped, generate_checkpoint(), generate_metadata(), {})
    assert refusal.value.details["head"] == kept[-1]["configurable"]["checkpoint_id"]
    cairn.put(kept[-1], generate_checkpoint(), generate_metadata(), {})


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/runs/delete", {"run_ids": []}),
        ("/runs/delete", {"run_ids": ["r"] * (threads.MAX_RUN_IDS + 1)}),
        ("/runs/delete", {"run_ids": ["r\x00"]}),
        ("/prune", {"thread_ids": ["t"], "strategy": "keep_oldest"}),
        ("/prune", {"thread_ids": []}),
        ("/copy", {"source_thread_id": "t"}),
        ("/copy", {"source_thread_id": "t", "target_thread_id": ""}),
    ],
)
def test_bad_requests_are_refused_with_a_stable_code_and_change_nothing(
    api: LambdaClient, address: Address, path: str, body: dict[str, Any]
):
    cairn = CairnSaver(address)
    chain(cairn, "t", 2, run_id="r")

    reply = api.request("POST", base(address) + path, json_body=body, token=address.read_token)

    assert reply.status in (400, 422) and reply.error_code, reply.text
    assert len(checkpoint_ids(cairn, "t")) == 2


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/runs/delete", {"run_ids": ["r"]}),
        ("/prune", {"thread_ids": ["t"], "strategy": "delete"}),
        ("/copy", {"source_thread_id": "t", "target_thread_id": "stolen"}),
    ],
)
def test_another_addresss_token_is_refused_and_changes_nothing(
    api: LambdaClient, address: Address, path: str, body: dict[str, Any]
):
    cairn = CairnSaver(address)
    chain(cairn, "t", 2, run_id="r")
    other = api.provision()

    for token in (other["credentials"]["read_token"], None):
        reply = api.request("POST", base(address) + path, json_body=body, token=token)
        assert (reply.status, reply.error_code) == (401, "unauthorized"), reply.text

    assert len(checkpoint_ids(cairn, "t")) == 2
    assert checkpoint_ids(cairn, "stolen") == []


def test_a_pruned_checkpoint_goes_with_every_write_even_past_one_transaction(api: LambdaClient, address: Address):
    cairn = CairnSaver(address)
    old, head = chain(cairn, "many-writes", 2)
    cairn.put_writes(old, [(f"ch{index}", index) for index in range(150)], "task")

    cairn.prune(["many-writes"])

    assert checkpoint_ids(cairn, "many-writes") == [head["configurable"]["checkpoint_id"]]
    # A checkpoint put again under the pruned id would find none of the old writes.
    body = {"thread_id": "many-writes", "checkpoint_id": old["configurable"]["checkpoint_id"]}
    reply = api.request(
        "POST",
        base(address),
        json_body={**body, "checkpoint": {"type": "bytes", "data": "eA=="}},
        token=address.read_token,
    )
    assert reply.status == 201, reply.text
    assert search(api, address, **body, checkpoint_ns="")["checkpoints"][0]["writes"] == []


def test_runs_are_matched_on_text_run_ids_only(address: Address):
    cairn = CairnSaver(address)
    chain(cairn, "odd-runs", 1, run_id={"not": "text"})
    chain(cairn, "odd-runs-2", 1, run_id=7)

    cairn.delete_for_runs(["7", "not"])

    assert len(checkpoint_ids(cairn, "odd-runs")) == 1 and len(checkpoint_ids(cairn, "odd-runs-2")) == 1
