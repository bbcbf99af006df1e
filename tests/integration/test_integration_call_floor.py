"""The agent-framework integrations' calls, counted, and what each still guarantees (DynamoDB Local).

Each SDK call is one request, and each request reads what it must, then
commits once with the address's token as the first condition. A checkpoint
put reads the address (whose expiry its items copy) and commits: a stale
writer is refused by the failed condition's returned head, with no read
after it. A session add reads the address and the session's head in one
batch; a pop reads the head and the newest item in one query (the head
sorts right above the items), and its commit checks the token. `make bench`
prints these beside the minimum each could have (`bench/floor.py`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from cairn.checkpoints.models import Blob, NewCheckpoint, Search
from cairn.dynamodb.client import make_client
from cairn.errors import CheckpointStale, Unauthorized
from cairn.services import Services
from cairn.settings import Settings

Counted = tuple[Services, Counter[str]]


@pytest.fixture
def process(dynamodb_local, local_table: str) -> Callable[[], Counted]:
    """The services as a new process has them: their own client (calls counted by operation), nothing known."""

    def new() -> Counted:
        settings = Settings(dynamodb_endpoint=dynamodb_local.endpoint, table_name=local_table)
        client = make_client(settings)
        calls: Counter[str] = Counter()
        client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.update([model.name]))
        return Services.build(settings, client=client), calls

    return new


def provision(services: Services) -> tuple[str, str]:
    created = services.provisioning.provision(client_ip="198.51.100.1")
    return created.record.id, created.read_token


def item(n: int) -> dict:
    return {"role": "user", "content": f"message {n}"}


def step(thread_id: str, checkpoint_id: str, parent_id: str | None) -> NewCheckpoint:
    return NewCheckpoint(
        thread_id=thread_id,
        checkpoint_ns="",
        checkpoint_id=checkpoint_id,
        parent_id=parent_id,
        if_new_thread=parent_id is None,
        checkpoint=Blob(type="json", data=b'{"messages": []}'),
        metadata_json='{"step": 0}',
    )


def test_an_add_reads_the_address_and_the_head_in_one_batch_then_commits_once(process) -> None:
    services, calls = process()
    address_id, token = provision(services)
    sessions = services.agent_sessions
    calls.clear()
    assert sessions.add(address_id, token, "s", [item(1)], add_id="a1") == 1  # the first add makes the session
    assert calls == Counter(BatchGetItem=1, TransactWriteItems=1)

    fresh, fresh_calls = process()
    assert fresh.agent_sessions.add(address_id, token, "s", [item(2), item(3)], add_id="a2") == 3
    assert fresh_calls == Counter(BatchGetItem=1, TransactWriteItems=1)
    fresh_calls.clear()
    # A retry of a committed add is told by its claim's failed condition: nothing added, no more calls.
    assert fresh.agent_sessions.add(address_id, token, "s", [item(2), item(3)], add_id="a2") == 3
    assert fresh_calls == Counter(BatchGetItem=1, TransactWriteItems=1)
    assert sessions.items(address_id, token, "s", limit=10, before=None).items == [item(1), item(2), item(3)]


def test_a_pop_reads_the_head_and_the_newest_item_in_one_query_then_commits_once(process) -> None:
    services, calls = process()
    address_id, token = provision(services)
    services.agent_sessions.add(address_id, token, "s", [item(1), item(2)], add_id="a1")

    fresh, fresh_calls = process()
    assert fresh.agent_sessions.pop(address_id, token, "s") == item(2)
    assert fresh_calls == Counter(Query=1, TransactWriteItems=1)
    calls.clear()
    assert services.agent_sessions.pop(address_id, token, "s") == item(1)  # not the item the other process took
    assert calls == Counter(Query=1, TransactWriteItems=1)
    calls.clear()
    assert services.agent_sessions.pop(address_id, token, "s") is None
    # An empty head says so: nothing to commit, and the address read refuses a stranger instead.
    assert calls == Counter(Query=1, GetItem=1)
    with pytest.raises(Unauthorized):
        services.agent_sessions.pop(address_id, "not-the-token", "s")
    with pytest.raises(Unauthorized):
        services.agent_sessions.add(address_id, "not-the-token", "s", [item(4)])
    services.agent_sessions.add(address_id, token, "s", [item(5)])
    with pytest.raises(Unauthorized):  # a session with items: the commit's address check refuses
        services.agent_sessions.pop(address_id, "not-the-token", "s")
    assert services.agent_sessions.items(address_id, token, "s", limit=10, before=None).items == [item(5)]


def test_a_compaction_reads_the_session_once_then_commits_once(process) -> None:
    """What the OpenAI Agents SDK's compaction costs: its snapshot is one query, and replacing the newest items
    one batch read, one query and one commit; replacing all of them one batch read and one commit, then the
    sweep of what the floor hid, as a clear's."""
    services, calls = process()
    address_id, token = provision(services)
    sessions = services.agent_sessions
    sessions.add(address_id, token, "s", [item(n) for n in range(4)])
    calls.clear()

    read = sessions.items(address_id, token, "s", limit=3, before=None)
    replaced = sessions.replace(address_id, token, "s", [item(9)], newest=3, version=read.version)
    assert calls == Counter(GetItem=1, Query=2, BatchGetItem=1, TransactWriteItems=1)
    assert (replaced.count, sessions.items(address_id, token, "s", limit=10, before=None).items) == (
        2,
        [item(0), item(9)],
    )
    calls.clear()

    sessions.replace(address_id, token, "s", [item(10)])
    assert calls == Counter(BatchGetItem=1, TransactWriteItems=1, Query=2, BatchWriteItem=1)
    assert sessions.items(address_id, token, "s", limit=10, before=None).items == [item(10)]


def test_a_put_reads_the_address_then_commits_once_and_a_stale_writer_costs_no_more(process) -> None:
    services, calls = process()
    address_id, token = provision(services)
    calls.clear()
    services.checkpoints.put(address_id, token, step("t", "0001", None))
    assert calls == Counter(GetItem=1, TransactWriteItems=1)

    fresh, fresh_calls = process()
    fresh.checkpoints.put(address_id, token, step("t", "0002", "0001"))
    assert fresh_calls == Counter(GetItem=1, TransactWriteItems=1)
    calls.clear()
    with pytest.raises(CheckpointStale) as stale:  # a second writer resuming from 0001 too
        services.checkpoints.put(address_id, token, step("t", "0003", "0001"))
    assert stale.value.details["head"] == "0002"  # from the failed condition's item, not a read
    assert calls == Counter(GetItem=1, TransactWriteItems=1)
    page = services.checkpoints.search(address_id, token, Search(thread_id="t", checkpoint_ns=""))
    assert [found.checkpoint_id for found in page.checkpoints] == ["0002", "0001"]  # one chain, no fork


def test_reading_the_latest_checkpoint_or_one_by_id_is_an_address_read_and_one_query(process) -> None:
    services, _ = process()
    address_id, token = provision(services)
    parent = None
    for number in range(1, 31):
        services.checkpoints.put(address_id, token, step("t", f"{number:04}", parent))
        parent = f"{number:04}"

    fresh, calls = process()
    latest = fresh.checkpoints.search(address_id, token, Search(thread_id="t", checkpoint_ns="", limit=1))
    assert [(found.checkpoint_id, found.parent_id) for found in latest.checkpoints] == [("0030", "0029")]
    assert calls == Counter(GetItem=1, Query=1)
    calls.clear()
    named = fresh.checkpoints.search(address_id, token, Search(thread_id="t", checkpoint_ns="", checkpoint_id="0012"))
    assert [found.checkpoint_id for found in named.checkpoints] == ["0012"]
    assert calls == Counter(GetItem=1, Query=1)
