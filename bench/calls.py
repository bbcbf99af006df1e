"""DynamoDB calls per API operation, counted on the service's own client.

A `CairnProcess` is what one Lambda container (or one `cairn serve`) holds:
a DynamoDB client, the services and the resolver. A new one stands for a
fresh process; it knows nothing yet, such as the last sequence it wrote.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from bench.address import PROVISION_PATH, Address, inbox_body
from bench.gateway import Reply, invoke
from bench.report import Table
from cairn.api.app import create_app
from cairn.dynamodb.client import make_client
from cairn.services import Services
from cairn.settings import Settings

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

CONCURRENT_WRITERS = 8


class CallCounts:
    """Calls by DynamoDB operation, HTTP attempts (which include SDK retries),
    and the actions in TransactWriteItems calls (each one a write DynamoDB bills)."""

    def __init__(self, calls: Counter[str], attempts: Counter[str], per: int = 1, transact_items: int = 0) -> None:
        self.calls = calls
        self.attempts = attempts
        self.per = per
        self.transact_items = transact_items

    @classmethod
    def combined(cls, parts: list[CallCounts], per: int) -> CallCounts:
        calls = sum((part.calls for part in parts), Counter())
        attempts = sum((part.attempts for part in parts), Counter())
        return cls(calls, attempts, per, sum(part.transact_items for part in parts))

    @property
    def total(self) -> float:
        """DynamoDB calls per operation, every operation name together."""
        return round(sum(self.calls.values()) / self.per, 2)

    @property
    def items_per_operation(self) -> float:
        """Transaction actions per operation, over every transaction it sent (lost ones included)."""
        return round(self.transact_items / self.per, 2)

    def _mean(self, counter: Counter[str]) -> dict[str, float]:
        return {name: round(count / self.per, 2) for name, count in counter.most_common()}

    def __str__(self) -> str:
        calls = self._mean(self.calls)
        text = f"{self.total:g} = " + " + ".join(f"{name} {count:g}" for name, count in calls.items())
        retries = (sum(self.attempts.values()) - sum(self.calls.values())) / self.per
        return text + (f" (+{retries:g} SDK retries)" if retries else "")

    def as_json(self) -> dict[str, Any]:
        return {"calls": self._mean(self.calls), "attempts": self._mean(self.attempts)}


class CallCounter:
    """Counts what a botocore client sends, by operation name."""

    def __init__(self, client: DynamoDBClient) -> None:
        self._lock = threading.Lock()
        self._calls: Counter[str] = Counter()
        self._attempts: Counter[str] = Counter()
        self._transact_items = 0
        # `before-call` fires once per API call, `before-send` once per HTTP
        # attempt, `provide-client-params` once per call with the caller's
        # parameters. Handlers return None: a returned value would replace them.
        client.meta.events.register("before-call.dynamodb", self._on_call)
        client.meta.events.register("before-send.dynamodb", self._on_send)
        client.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", self._on_transaction)

    def _on_call(self, event_name: str, **_: Any) -> None:
        with self._lock:
            self._calls[event_name.rsplit(".", 1)[-1]] += 1

    def _on_send(self, event_name: str, **_: Any) -> None:
        with self._lock:
            self._attempts[event_name.rsplit(".", 1)[-1]] += 1

    def _on_transaction(self, params: dict[str, Any], **_: Any) -> None:
        with self._lock:
            self._transact_items += len(params.get("TransactItems", ()))

    def take(self, per: int = 1) -> CallCounts:
        """What was counted since the last `take`, as a mean over `per` operations."""
        with self._lock:
            counts = CallCounts(self._calls, self._attempts, per, self._transact_items)
            self._calls, self._attempts, self._transact_items = Counter(), Counter(), 0
        return counts


class CairnProcess:
    """The resolver with its own services and counted DynamoDB client."""

    def __init__(self, settings: Settings) -> None:
        self.client = client = make_client(settings)
        self.counter = CallCounter(client)
        # The default waiter is Lambda's; these calls never wait anyway.
        self.app = create_app(Services.build(settings, client=client))

    def provision(self) -> Reply:
        return self.request("POST", PROVISION_PATH, json_body={"task_id": "bench"})

    def request(self, method: str, path: str, **kwargs: Any) -> Reply:
        return invoke(self.app, method, path, **kwargs)


class Scenario:
    """One address and the requests made on it, with fresh keys and event ids."""

    DUPLICATE_KEY = "bench:duplicate"

    def __init__(self, process: CairnProcess, *, history: bool = True) -> None:
        reply = process.provision()
        if reply.status != 201:
            raise RuntimeError(f"provisioning answered {reply.status}: {reply.body}")
        self.address = Address.from_provisioned(reply.body)
        self._numbers = itertools.count(1)
        self.event_ids: list[str] = []
        if history:
            # So a fresh process meets an address that already has events, and
            # the duplicate posts have a key to repeat.
            for _ in range(3):
                self.post_new(process)
            self.post_duplicate(process)

    def post_new(self, process: CairnProcess) -> Reply:
        number = next(self._numbers)
        reply = process.request(
            "POST",
            self.address.inbox_path,
            headers={"Idempotency-Key": f"bench:{number}"},
            json_body=inbox_body(number),
        )
        if reply.status == 202:
            self.event_ids.append(reply.body["event"]["id"])
        return reply

    def post_duplicate(self, process: CairnProcess) -> Reply:
        return process.request(
            "POST",
            self.address.inbox_path,
            headers={"Idempotency-Key": self.DUPLICATE_KEY},
            json_body=inbox_body(0),
        )

    def poll(self, process: CairnProcess) -> Reply:
        query = {"after": "0", "wait": "0"}
        return process.request("GET", self.address.events_path, query=query, headers=self.address.auth)

    def ack(self, process: CairnProcess) -> Reply:
        # Each ack takes a different event: the first acknowledgement of each.
        return process.request("POST", self.address.ack_path(self.event_ids.pop(0)), headers=self.address.auth)


def measure_calls(settings: Settings, repeats: int) -> Table:
    table = Table(
        "DynamoDB calls per operation (resolver with API Gateway events, DynamoDB Local)",
        ["operation", "status", "first call in a fresh process", f"steady state (mean of {repeats})"],
    )
    steady = CairnProcess(settings)
    scenario = Scenario(steady)
    operations = [
        ("provision", CairnProcess.provision),
        ("inbox post (new key)", scenario.post_new),
        ("inbox post (same key, same body)", scenario.post_duplicate),
        ("poll (wait=0)", scenario.poll),
        ("ack", scenario.ack),
    ]
    for name, operation in operations:
        # Steady first: a fresh process's post moves the head under the steady
        # process's hint, which would charge the next steady post a retry.
        steady.counter.take()
        statuses = Counter(operation(steady).status for _ in range(repeats))
        steady_counts = steady.counter.take(per=repeats)
        fresh = CairnProcess(settings)
        statuses[operation(fresh).status] += 1
        table.add(name, status_text(statuses), fresh.counter.take(), steady_counts)

    turns = [steady, CairnProcess(settings)]
    for process in turns:
        process.counter.take()
    statuses = Counter(scenario.post_new(turns[i % 2]).status for i in range(repeats))
    counts = CallCounts.combined([process.counter.take() for process in turns], per=repeats)
    table.add("inbox post, 2 processes taking turns", status_text(statuses), "-", counts)

    shared = CairnProcess(settings)
    counts, shared_statuses = _concurrent_posts([shared] * CONCURRENT_WRITERS, repeats)
    table.add(f"inbox post, {CONCURRENT_WRITERS} writers, one process", shared_statuses, "-", counts)
    separate = [CairnProcess(settings) for _ in range(CONCURRENT_WRITERS)]
    counts, separate_statuses = _concurrent_posts(separate, repeats)
    table.add(
        f"inbox post, {CONCURRENT_WRITERS} writers, {CONCURRENT_WRITERS} processes", separate_statuses, "-", counts
    )

    table.notes += [
        "The sequence hint is per process and starts at 0: a fresh process's first post to an address that "
        "already holds events loses one transaction and learns the head from it (ALL_OLD).",
        "Taking turns: two processes alternate posts to one address, as warm Lambda containers may; "
        "each finds its hint stale.",
        f"Concurrent rows: {CONCURRENT_WRITERS} threads each post {repeats} times to one new address; one "
        f"process shares its hint (like cairn serve), {CONCURRENT_WRITERS} processes do not (like Lambda "
        "containers); the mean is per post.",
    ]
    return table


def _concurrent_posts(writers: list[CairnProcess], posts_each: int) -> tuple[CallCounts, str]:
    """Each writer posts `posts_each` times on its own thread, all to one new address."""
    scenario = Scenario(writers[0], history=False)
    unique = list({id(process): process for process in writers}.values())
    for process in unique:
        process.counter.take()

    def post_many(process: CairnProcess) -> list[int]:
        return [scenario.post_new(process).status for _ in range(posts_each)]

    with ThreadPoolExecutor(len(writers)) as pool:
        statuses = Counter(status for batch in pool.map(post_many, writers) for status in batch)
    counts = CallCounts.combined([process.counter.take() for process in unique], per=statuses.total())
    return counts, status_text(statuses)


def status_text(statuses: Counter[Any]) -> str:
    """ "202" when every reply (or outcome) agreed, else each with its count."""
    if len(statuses) == 1:
        return str(next(iter(statuses)))
    return ", ".join(f"{status} x{count}" for status, count in sorted(statuses.items()))
