"""Wake-ups by webhook: latency from an inbox POST's answer to the webhook's arrival (idle, and while
another address's receiver holds its answers open), deliveries per second through the stream's
dispatcher, and what a subscribed agent's idle wait costs in DynamoDB reads beside a long-poll's."""

from __future__ import annotations

import threading
import time
from typing import Any

from bench import agent
from bench.address import Address
from bench.calls import CallCounter
from bench.report import Table
from bench.server import CairnServer
from bench.timing import percentile_ms, processor_seconds
from cairn.dynamodb.client import make_client, make_streams_client
from cairn.dynamodb.table import ensure_table
from cairn.dynamodb.waiters import PollingWaiter
from cairn.local.dynamodb_local import DynamoDBLocal
from cairn.local.wakeups import StreamFollower
from cairn.services import Services
from cairn.settings import Settings
from cairn.wakeups.models import Delivery, Outcome, Subscription
from tests.support.lambda_client import LambdaClient
from tests.support.streams import stream_notices
from tests.support.webhooks import Receiver, holding_receiver, receiver

BURST = 200
IDLE_SECONDS = 25
# How long cairn serve is left idle while its processor time is counted.
QUIET_SECONDS = 15
DISPATCHED = 20


def measure_webhooks(server: CairnServer, database: DynamoDBLocal, settings: Settings, trials: int) -> Table:
    table = Table(
        f"Wake-ups by webhook on cairn serve (DynamoDB Local's stream), {trials} trials",
        ["measure", "p50 ms", "p99 ms", "value"],
    )
    with server.client() as http, receiver() as hook, holding_receiver(interval=1.0) as slow:
        address = agent.provision(http)
        _subscribe(http, address, hook.url)
        arrivals = _latencies(http, address, hook, first=0, trials=trials)
        table.add("inbox POST answered -> webhook arrived", *_p50_p99(arrivals), "")
        for _ in range(BURST):
            agent.post(http, address)
        hook.wait_for(trials + BURST, timeout=300)
        # From the burst's first arrival to its last: the dispatcher's pace, not the posts'.
        elapsed = _arrived_at(hook, trials + BURST - 1) - _arrived_at(hook, trials)
        pace = f"{(BURST - 1) / elapsed:.0f} deliveries/s"
        table.add(f"{BURST} posts back to back, delivered in order to one subscription", "", "", pace)
        table.add(
            f"processor time while cairn serve is idle {QUIET_SECONDS} s: the server / its DynamoDB Local",
            "",
            "",
            _quiet_cost(server, database),
        )
        # Another address whose receiver trickles every answer until the delivery deadline cuts it.
        stalled = agent.provision(http)
        _subscribe(http, stalled, slow.url)
        agent.post(http, stalled).raise_for_status()
        slow.arrived.wait(30)
        held = _latencies(http, address, hook, first=trials + BURST, trials=trials)
        table.add("the same, while another address's receiver holds its answers open", *_p50_p99(held), "")
    idle, polled = _idle_reads(settings)
    quiet, watched = _dispatch_calls(settings)
    table.add(
        f"dispatcher's DynamoDB table calls per event, {DISPATCHED} events: address with no subscription / one",
        "",
        "",
        f"{quiet:g} / {watched:g}",
    )
    table.add(f"DynamoDB table calls, subscribed agent idle {IDLE_SECONDS} s", "", "", idle)
    table.add(f"DynamoDB table calls, one long-poll wait={IDLE_SECONDS} (Lambda's waiter)", "", "", polled)
    table.notes.append(
        "The receiver runs in this process on 127.0.0.1. cairn serve reads its stream as soon as it commits an "
        "event; when idle it rests between reads, 0.1 s doubling to 1 s, which only a record written by another "
        "process waits out. Deliveries to one subscription are sequential, by design."
    )
    table.notes.append(
        "Idle: a subscription and no posts, after the burst above was delivered. The server's stream reader, its "
        "retry sweep (1 s doubling to 10 s while it finds nothing) and outcome sweep (a tenth of the outcome "
        "deadline apart, 2 s to a minute), and what they ask of DynamoDB Local."
    )
    table.notes.append(
        "Held open: that receiver sends a header byte a second and never ends its answer; each attempt to it "
        "is cut at the delivery deadline and retried with back-off while the trials run."
    )
    table.notes.append(
        "Per event: handed to the dispatcher in one batch from the stream. An event written while its address "
        "had no subscription is marked so by the append; the dispatcher passes it by (in AWS the event source "
        "mapping's filter drops it before any invocation). With one subscription: its list, the noted event and "
        "the delivery's lease, read and progress."
    )
    table.notes.append(
        "Idle: the dispatcher reads the table's stream (not the table) and finds nothing to do; in AWS the "
        "event source mapping reads the stream at no table cost. The retry sweep (one query a minute in AWS, "
        "for the whole deployment) is not counted."
    )
    return table


def _latencies(http: Any, address: Address, hook: Any, *, first: int, trials: int) -> list[float]:
    """Seconds from each POST's answer to its webhook's arrival; `first` webhooks arrived before."""
    arrivals: list[float] = []
    for trial in range(trials):
        posted = _post_and_time(http, address)
        hook.wait_for(first + trial + 1)
        arrivals.append(_arrived_at(hook, first + trial) - posted)
    return arrivals


def _p50_p99(samples: list[float]) -> tuple[float, float]:
    return percentile_ms(samples, 50), percentile_ms(samples, 99)


def _subscribe(http: Any, address: Address, url: str) -> None:
    path = address.events_path.removesuffix("/events") + "/subscriptions"
    reply = http.post(path, json={"target": {"kind": "webhook", "url": url}}, headers=address.auth)
    reply.raise_for_status()


def _post_and_time(http: Any, address: Address) -> float:
    agent.post(http, address).raise_for_status()
    return time.perf_counter()


def _arrived_at(hook: Receiver, index: int) -> float:
    return hook.arrival_times[index]


def _quiet_cost(server: CairnServer, database: DynamoDBLocal) -> str:
    assert server.pid is not None and database.pid is not None
    pids = (server.pid, database.pid)
    time.sleep(2)  # the reader's rests grow to their longest
    before = [processor_seconds(pid) for pid in pids]
    time.sleep(QUIET_SECONDS)
    spent = [processor_seconds(pid) - used for pid, used in zip(pids, before, strict=True)]
    share = 100 * sum(spent) / QUIET_SECONDS
    return f"{spent[0]:.2f} s / {spent[1]:.2f} s ({share:.1f} % of a core)"


def _idle_reads(settings: Settings) -> tuple[int, int]:
    """Table calls while a subscribed address waits idle (stream followed), and during one long-poll.

    `settings` name a fresh table, so its stream holds only what this writes.
    """
    client = make_client(settings)
    ensure_table(client, settings.table_name)
    counter = CallCounter(client)
    services = Services.build(settings, client=client, waiter=PollingWaiter())
    api = LambdaClient(services)
    created = api.provision()
    token = created["credentials"]["read_token"]
    path = f"/api/v1/addresses/{created['address']['id']}/subscriptions"
    api.request("POST", path, json_body={"target": {"kind": "webhook", "url": "https://example.com/hook"}}, token=token)
    stream_arn = client.describe_table(TableName=settings.table_name)["Table"]["LatestStreamArn"]
    follower = StreamFollower(make_streams_client(settings), stream_arn, services.dispatcher)
    stop = threading.Event()
    reader = threading.Thread(target=follower.run, args=(stop,), daemon=True)
    # Let the follower pass the records the setup wrote (the subscription finds no events after itself).
    reader.start()
    time.sleep(2)
    counter.take()
    time.sleep(IDLE_SECONDS)
    idle = round(counter.take().total)
    stop.set()
    reader.join()
    api.poll(created, wait=IDLE_SECONDS)
    polled = round(counter.take().total)
    return idle, polled


class _Answered:
    """A webhook target that answers at once, so only the table's calls are counted."""

    def send(self, subscription: Subscription, delivery: Delivery, now: float) -> Outcome:
        return Outcome(delivered=True, status_code=200)


def _dispatch_calls(settings: Settings) -> tuple[float, float]:
    """The dispatcher's table calls per event for an address nobody subscribes to, and for one subscribed.

    `settings` name a table with a stream; a new process's services dispatch what it holds.
    """
    client = make_client(settings)
    ensure_table(client, settings.table_name)
    poster = LambdaClient(Services.build(settings, client=client))
    quiet, watched = poster.provision(), poster.provision()
    path = f"/api/v1/addresses/{watched['address']['id']}/subscriptions"
    target = {"target": {"kind": "webhook", "url": "https://example.com/hook"}}
    poster.request("POST", path, json_body=target, token=watched["credentials"]["read_token"])
    for created in (quiet, watched):
        for n in range(DISPATCHED):
            poster.post_inbox(created, {"type": "job.done", "data": {"n": n}})
    notices = stream_notices(settings)
    dispatching = make_client(settings)
    counter = CallCounter(dispatching)
    dispatcher = Services.build(settings, client=dispatching, wake_transport=_Answered()).dispatcher
    per_address = []
    for created in (quiet, watched):
        dispatcher.dispatch([notice for notice in notices if notice.address_id == created["address"]["id"]])
        per_address.append(counter.take(per=DISPATCHED).total)
    return per_address[0], per_address[1]
