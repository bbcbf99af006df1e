"""Address operations at the call floor, and what they still guarantee (DynamoDB Local).

Each operation's credential, rate count and sequence are conditions of its
one write, so nothing is read before it: a provision is one transaction, a
poll one conditional update of the head (which returns the head) and its
query, an acknowledgement one transaction, a state write one consistent
read and its transaction (a conflict only the read). Refusals come from the failed
condition's returned items, never from a guess.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from cairn.addresses.inbox import InboxRequest
from cairn.addresses.state import StateOperation
from cairn.clock import Clock, system_clock
from cairn.dynamodb.client import make_client
from cairn.errors import NotFound, RateLimited, RevisionConflict, Unauthorized
from cairn.services import Services
from cairn.settings import Settings
from tests.support.fakes import FakeClock

Counted = tuple[Services, Counter[str]]


@pytest.fixture
def process(dynamodb_local, local_table: str) -> Callable[..., Counted]:
    """The services as a new process has them: their own client (calls counted by operation), nothing known."""

    def new(clock: Clock = system_clock, **limits: int) -> Counted:
        settings = Settings(dynamodb_endpoint=dynamodb_local.endpoint, table_name=local_table, **limits)
        client = make_client(settings)
        calls: Counter[str] = Counter()
        client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.update([model.name]))
        return Services.build(settings, client=client, clock=clock), calls

    return new


def provision(services: Services, ip: str = "198.51.100.1"):
    return services.provisioning.provision(client_ip=ip)


def post(services: Services, created, n: int) -> str:
    request = InboxRequest(body=json.dumps({"n": n}).encode(), content_type="application/json")
    return services.inbox.deliver(created.record.id, created.inbox_secret, request).events[0].id


def test_provisioning_is_one_transaction_and_keeps_the_per_client_rate(process) -> None:
    services, calls = process(create_rate_per_minute=2)
    provision(services)
    assert calls == Counter(TransactWriteItems=1)
    provision(services)
    calls.clear()
    with pytest.raises(RateLimited):
        provision(services)
    assert calls == Counter(TransactWriteItems=1)
    provision(services, ip="198.51.100.2")  # another client has its own rate


def test_a_poll_is_one_counted_admission_and_its_query(process) -> None:
    services, calls = process()
    created = provision(services)
    calls.clear()
    page = services.feed.poll(created.record.id, created.read_token, after=0, wait=0, limit=10)
    assert page.events == []
    assert calls == Counter(UpdateItem=1, Query=1)

    fresh, fresh_calls = process()
    fresh.feed.poll(created.record.id, created.read_token, after=0, wait=0, limit=10)
    assert fresh_calls == Counter(UpdateItem=1, Query=1)


def test_every_refusal_is_the_same_and_counts_nothing(process) -> None:
    services, calls = process(poll_rate_per_minute=2)
    created = provision(services)
    gone = provision(services)
    services.provisioning.delete(gone.record.id, gone.read_token)
    unknown = "addr_" + "a" * 26
    for address_id, token in [(created.record.id, "crt_wrong"), (gone.record.id, gone.read_token), (unknown, "x")]:
        calls.clear()
        with pytest.raises(Unauthorized):
            services.feed.poll(address_id, token, after=0, wait=0, limit=10)
        # Decided on what the refused update returned: the head, or nothing where there is none.
        assert calls == Counter(UpdateItem=1)
    # The wrong tokens counted nothing: the owner still has both polls of the minute, then the rate is spent.
    for _ in range(2):
        services.feed.poll(created.record.id, created.read_token, after=0, wait=0, limit=10)
    with pytest.raises(RateLimited):
        services.feed.poll(created.record.id, created.read_token, after=0, wait=0, limit=10)
    with pytest.raises(Unauthorized):  # a stranger learns nothing of the owner's rate
        services.feed.poll(created.record.id, "crt_wrong", after=0, wait=0, limit=10)


def test_a_new_minute_restores_the_rate_and_a_wrong_window_guess_costs_one_more_update(process) -> None:
    clock = FakeClock()
    clock.advance(-(clock() % 60))  # the start of a minute
    services, calls = process(clock, poll_rate_per_minute=1)
    created = provision(services)

    def poll(of: Services) -> None:
        of.feed.poll(created.record.id, created.read_token, after=0, wait=0, limit=10)

    poll(services)
    with pytest.raises(RateLimited) as limited:
        poll(services)
    assert limited.value.retry_after == 60
    clock.advance(60)
    calls.clear()
    poll(services)  # this process saw the old window: it starts the new one at once
    assert calls == Counter(UpdateItem=1, Query=1)
    clock.advance(60)
    fresh, fresh_calls = process(clock, poll_rate_per_minute=1)
    poll(fresh)  # a process that knows nothing guesses the window goes on; the returned head corrects it
    assert fresh_calls == Counter(UpdateItem=2, Query=1)
    with pytest.raises(RateLimited):
        poll(services)


def test_concurrent_polls_of_one_minute_are_counted_exactly(process) -> None:
    limit = 12
    clock = FakeClock()  # one minute for every poll
    stores = [process(clock, poll_rate_per_minute=limit)[0] for _ in range(4)]
    created = provision(stores[0])

    def poll(index: int) -> str:
        try:
            stores[index % 4].feed.poll(created.record.id, created.read_token, after=0, wait=0, limit=10)
        except RateLimited:
            return "limited"
        return "ok"

    with ThreadPoolExecutor(8) as pool:
        outcomes = Counter(pool.map(poll, range(20)))
    assert outcomes == Counter(ok=limit, limited=20 - limit)


def test_an_acknowledgement_is_one_transaction_and_a_repeat_keeps_the_first_time(process) -> None:
    services, calls = process()
    created = provision(services)
    event_id = post(services, created, 1)
    calls.clear()
    first = services.feed.acknowledge(created.record.id, created.read_token, event_id)
    assert calls == Counter(TransactWriteItems=1)

    fresh, fresh_calls = process()
    again = fresh.feed.acknowledge(created.record.id, created.read_token, event_id)
    assert again.acknowledged_at == first.acknowledged_at
    assert fresh_calls == Counter(TransactWriteItems=1)  # the repeat is told by the failed condition's item
    counts = services.provisioning.describe(created.record.id, created.read_token).counts
    assert (counts.retained, counts.unacknowledged) == (1, 0)  # counted once


def test_an_acknowledgement_refuses_before_it_tells_whether_the_event_exists(process) -> None:
    services, calls = process()
    created = provision(services)
    event_id = post(services, created, 1)
    other = provision(services)
    for token in ("crt_wrong", other.read_token):
        with pytest.raises(Unauthorized):
            services.feed.acknowledge(created.record.id, token, event_id)
        with pytest.raises(Unauthorized):
            services.feed.acknowledge(created.record.id, token, event_id.replace("evt_1_", "evt_9_"))
    calls.clear()
    with pytest.raises(NotFound):
        services.feed.acknowledge(created.record.id, created.read_token, event_id.replace("evt_1_", "evt_9_"))
    assert calls == Counter(TransactWriteItems=1)  # no event came back with the refusal: there is none
    services.feed.acknowledge(created.record.id, created.read_token, event_id)
    with pytest.raises(Unauthorized):  # a repeat is answered to the owner only
        services.feed.acknowledge(created.record.id, other.read_token, event_id)
    services.provisioning.delete(created.record.id, created.read_token)
    calls.clear()
    with pytest.raises(Unauthorized):
        services.feed.acknowledge(created.record.id, created.read_token, event_id)
    assert calls == Counter(TransactWriteItems=1)
    counts = services.provisioning.describe(other.record.id, other.read_token).counts
    assert (counts.retained, counts.unacknowledged) == (0, 0)


def test_concurrent_first_acknowledgements_count_once(process) -> None:
    services, _ = process()
    created = provision(services)
    event_ids = [post(services, created, n) for n in range(3)]
    others = [process()[0] for _ in range(4)]

    def ack(index: int) -> float:
        feed = others[index % 4].feed
        return feed.acknowledge(created.record.id, created.read_token, event_ids[index % 3]).acknowledged_at

    with ThreadPoolExecutor(8) as pool:
        times = list(pool.map(ack, range(24)))
    assert all(times[i] == times[i % 3] for i in range(24))
    counts = services.provisioning.describe(created.record.id, created.read_token).counts
    assert (counts.retained, counts.unacknowledged) == (3, 0)


def test_state_writes_read_once_and_commit_once_and_a_conflict_only_reads(process) -> None:
    services, calls = process()
    created = provision(services)
    address_id, token = created.record.id, created.read_token
    services.state.apply(address_id, token, [StateOperation("k", "set", 1, if_revision=0)])
    calls.clear()
    services.state.apply(address_id, token, [StateOperation("k", "set", 2, if_revision=1)])
    assert calls == Counter(BatchGetItem=1, TransactWriteItems=1)
    calls.clear()
    with pytest.raises(RevisionConflict):
        services.state.apply(address_id, token, [StateOperation("k", "set", 3, if_revision=1)])
    assert calls == Counter(BatchGetItem=1)


def test_a_batch_answers_its_usage_without_another_read(process) -> None:
    services, calls = process()
    created = provision(services)
    address_id, token = created.record.id, created.read_token
    keys = [f"b{index}" for index in range(5)]
    services.state.apply(address_id, token, [StateOperation(key, "set", "x", if_revision=0) for key in keys])
    calls.clear()
    operations = [StateOperation(key, "set", "longer value", if_revision=1) for key in keys]
    writes, usage = services.state.apply_with_usage(address_id, token, operations)
    assert calls == Counter(BatchGetItem=1, TransactWriteItems=1)
    assert [write.revision for write in writes] == [2] * 5
    assert usage == services.state_table.usage(address_id)  # what storage holds after the batch
