"""The API handler's own time per request, with DynamoDB's time taken out, and what a million cost.

API Gateway REST proxy events go straight to `cairn.entrypoints.api_handler.lambda_handler`, the
function Lambda calls, imported in this process with the environment Lambda gives it (so its
services, client and resolver are the ones a warm container holds). Per hot operation: the
handler's time per request, the time spent inside the DynamoDB client's calls (botocore's
`provide-client-params` event, its first, to `after-call`, its last: serialising, the round trip
to DynamoDB Local, parsing, retries), and their difference, the handler's overhead, which is what
Cairn adds above the DynamoDB work it has to do. The difference is taken per request, then its
percentiles.

Then a cost per million requests: Lambda's GB-seconds at the API function's memory for the
measured p50 (billed by the millisecond, rounded up), and DynamoDB's request units, at on-demand
list prices. Reads and single writes count the units the calls report
(`ReturnConsumedCapacity=TOTAL`, asked on a separate pass so the timed requests are the service's
own); transactions are counted from their requests (see `transaction_write_units`). Beside it the
raw boto3 transactions of `bench.baseline` and `bench.cas_baseline`, timed and counted the same way.

Last, a cProfile of the operation with the largest overhead p50, paused inside the DynamoDB calls:
the functions where its overhead goes.

The import stays for the rest of the process, as in a Lambda container: its `container_init`
freezes the objects made so far out of garbage collection, and its logger is quieted afterwards.
"""

from __future__ import annotations

import cProfile
import importlib
import itertools
import json
import logging
import math
import os
import pstats
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from bench.address import PROVISION_PATH, Address, inbox_body
from bench.baseline import RawAppender
from bench.calls import status_text
from bench.cas_baseline import RawCounters
from bench.gateway import proxy_event
from bench.report import Table
from bench.timing import percentile_ms
from cairn.dynamodb.client import make_client
from cairn.dynamodb.items import key, n
from cairn.runtime import wire
from cairn.settings import MAX_EVENTS_LIMIT, Settings, get_settings
from tests.contract.builders import T0, note, root_start, run_start

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

HANDLER_MODULE = "cairn.entrypoints.api_handler"
SESSION = "handler-session"
BATCH_SIZE = 5
STATE_VALUE = {"step": 3, "todo": ["render", "upload"]}
# A value near an address's whole state budget (64 KB by default): what a larger body costs the handler.
LARGE_STATE_VALUE = {"notes": [{"id": index, "text": "a line of the agent's notes"} for index in range(1_200)]}

# Issue 30's targets for the handler's overhead at p50; runtime starts do more (a run head, a session pointer).
TARGET_MS = 1.0
START_TARGET_MS = 2.0

# The API function's memory (infra/service.py, `ApiFunction`) and architecture (infra/code.py: arm64).
API_MEMORY_MB = 1024
# AWS list prices, us-east-1, read 2026: Lambda on arm64 (https://aws.amazon.com/lambda/pricing/, first
# pricing tier) and DynamoDB on-demand request units (https://aws.amazon.com/dynamodb/pricing/on-demand/).
LAMBDA_PER_GB_SECOND = 0.0000133334
LAMBDA_PER_REQUEST = 0.20 / 1_000_000
DYNAMODB_PER_WRITE_UNIT = 0.625 / 1_000_000
DYNAMODB_PER_READ_UNIT = 0.125 / 1_000_000

# Operations whose request takes ReturnConsumedCapacity, by what they consume.
READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
# Requests per operation on the capacity pass: units barely vary between requests of one kind.
CAPACITY_REQUESTS = 3
PROFILE_ROWS = 15


@dataclass(frozen=True)
class LambdaContext:
    """The attributes of Lambda's context that the handler's logger reads."""

    function_name: str = "cairn-api"
    memory_limit_in_mb: int = API_MEMORY_MB
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:cairn-api"
    aws_request_id: str = "bench"


@dataclass
class DynamoDBClock:
    """Time and request units inside one botocore client's calls; the process makes one call at a time."""

    seconds: float = 0.0
    calls: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    ask_capacity: bool = False
    # When set, profiles the time outside the client's calls only: the handler's overhead.
    profiler: cProfile.Profile | None = None
    _started: float = 0.0

    def attach(self, client: DynamoDBClient) -> DynamoDBClock:
        # Handlers return None: a value returned from these events would replace botocore's own.
        client.meta.events.register("provide-client-params.dynamodb", self._on_start)
        client.meta.events.register("after-call.dynamodb", self._on_end)
        return self

    def _on_start(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if self.profiler is not None:
            self.profiler.disable()
        if self.ask_capacity and model.name == "TransactWriteItems":
            self.write_units += transaction_write_units(params["TransactItems"])
        elif self.ask_capacity and model.name in READS | WRITES:
            params["ReturnConsumedCapacity"] = "TOTAL"
        self._started = time.perf_counter()

    def _on_end(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        self.seconds += time.perf_counter() - self._started
        self.calls += 1
        if self.profiler is not None:
            self.profiler.enable()
        consumed = parsed.get("ConsumedCapacity") or []
        units = sum(part.get("CapacityUnits", 0.0) for part in (consumed if isinstance(consumed, list) else [consumed]))
        if model.name in WRITES:
            self.write_units += units
        else:
            self.read_units += units

    def reset(self) -> None:
        self.seconds, self.calls, self.read_units, self.write_units = 0.0, 0, 0.0, 0.0


def transaction_write_units(actions: list[dict[str, Any]]) -> float:
    """What DynamoDB bills a committed TransactWriteItems: 2 write units per action per started KB.

    DynamoDB Local reports fewer (2.0 for three small Puts), so the bench counts them from the
    request: a Put by its item's size, an Update, Delete or ConditionCheck as one KB (the item's
    size is not in the request; Cairn's heads and guards are far below it).
    """
    units = 0
    for action in actions:
        put = action.get("Put")
        size = _item_bytes(put["Item"]) if put else 1
        units += 2 * max(1, math.ceil(size / 1024))
    return float(units)


def _item_bytes(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + _value_bytes(value) for name, value in item.items())


def _value_bytes(value: dict[str, Any]) -> int:
    """An attribute value's size by DynamoDB's rules, near enough (numbers: about a byte per two digits)."""
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return len(inner.encode())
    if kind == "B":
        return len(inner)
    if kind == "N":
        return len(inner) // 2 + 1
    if kind == "M":
        return 3 + _item_bytes(inner)
    if kind == "L":
        return 3 + sum(1 + _value_bytes(element) for element in inner)
    if kind in ("SS", "NS", "BS"):
        return sum(_value_bytes({kind[0]: element}) for element in inner)
    return 1


@dataclass
class Samples:
    """One operation's requests: total and DynamoDB seconds each, and their statuses."""

    totals: list[float] = field(default_factory=list)
    dynamodb: list[float] = field(default_factory=list)
    calls: int = 0
    statuses: Counter[Any] = field(default_factory=Counter)

    @property
    def overheads(self) -> list[float]:
        return [total - inside for total, inside in zip(self.totals, self.dynamodb, strict=True)]


@dataclass(frozen=True)
class Units:
    """Lambda milliseconds and DynamoDB request units of one request."""

    ms: float
    read_units: float
    write_units: float

    @property
    def lambda_cost(self) -> float:
        billed_seconds = math.ceil(self.ms) / 1000
        return LAMBDA_PER_REQUEST + billed_seconds * API_MEMORY_MB / 1024 * LAMBDA_PER_GB_SECOND

    @property
    def dynamodb_cost(self) -> float:
        return self.read_units * DYNAMODB_PER_READ_UNIT + self.write_units * DYNAMODB_PER_WRITE_UNIT

    @property
    def per_million(self) -> float:
        return round((self.lambda_cost + self.dynamodb_cost) * 1_000_000, 2)


Request = Callable[[], dict[str, Any]]


class Handler:
    """`lambda_handler` of a container built on `settings`, timed, and its DynamoDB client's clock."""

    def __init__(self, settings: Settings) -> None:
        self.module = _import_handler(settings)
        self.clock = DynamoDBClock().attach(self.module.services.client.client())
        self.context = LambdaContext()

    def call(self, event: dict[str, Any], samples: Samples | None = None) -> dict[str, Any]:
        self.clock.reset()
        began = time.perf_counter()
        response: dict[str, Any] = self.module.lambda_handler(event, self.context)
        elapsed = time.perf_counter() - began
        if samples is not None:
            samples.totals.append(elapsed)
            samples.dynamodb.append(self.clock.seconds)
            samples.calls += self.clock.calls
            samples.statuses[response["statusCode"]] += 1
        return response


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """`values` in os.environ for the block only: later parts build their own Settings from it."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _import_handler(settings: Settings) -> ModuleType:
    """The entry point's module, imported (its services built) with the environment Lambda would give it."""
    if HANDLER_MODULE in sys.modules:
        raise RuntimeError(f"{HANDLER_MODULE} was imported before the bench could set its environment")
    values = {
        "CAIRN_TABLE_NAME": settings.table_name,
        "CAIRN_DYNAMODB_ENDPOINT": settings.dynamodb_endpoint or "",
        "CAIRN_POLL_RATE_PER_MINUTE": str(settings.poll_rate_per_minute),
        "CAIRN_CREATE_RATE_PER_MINUTE": str(settings.create_rate_per_minute),
        "CAIRN_MAX_EVENTS": str(settings.max_events),
        # As infra/function.py sets them for every function.
        "POWERTOOLS_SERVICE_NAME": "cairn",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "POWERTOOLS_LOGGER_LOG_EVENT": "false",
    }
    # Other entry points, imported by earlier parts, cached the settings of the bench's own environment.
    get_settings.cache_clear()
    with _environment(values):
        module = importlib.import_module(HANDLER_MODULE)
    get_settings.cache_clear()
    if module.services.settings.table_name != settings.table_name:
        raise RuntimeError(f"{HANDLER_MODULE} did not read the environment the bench set")
    return module


def _answered(response: dict[str, Any]) -> Any:
    return json.loads(response.get("body") or "null")


def _ignore(_: dict[str, Any]) -> None:
    return None


@dataclass
class Operation:
    """One hot operation: a new event for each request, and what is kept from each answer."""

    name: str
    event: Request
    # None: issue 30 states no target for it (a body far larger than the hot operations').
    target_ms: float | None = TARGET_MS
    answered: Callable[[dict[str, Any]], None] = _ignore


class Scenario:
    """The addresses, keys and runs the operations act on, made through the handler (not measured)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.posting = self._provision()
        # Polls read an address that keeps one event, so every answer is the same small page.
        self.reading = self._provision()
        handler.call(self._post(self.reading, "bench:only"))
        self.state = self._provision()
        self.large_state = self._provision()
        self.batching = self._provision()
        self.numbers = itertools.count(1)
        self.event_ids: list[str] = []
        self.state_revision = 0
        # The key the reads read and the writes replace.
        handler.call(self._state_write())
        self.batch_revision = 0
        store = handler.module.services.runtime
        store.create_session(SESSION, T0)
        self.parent = run_start("handler-parent", session=SESSION)
        store.start_root_run(root_start(self.parent))

    def _provision(self) -> Address:
        answer = _answered(self.handler.call(proxy_event("POST", PROVISION_PATH, json_body={"task_id": "bench"})))
        return Address.from_provisioned(answer)

    @staticmethod
    def _post(address: Address, key: str, number: int = 0) -> dict[str, Any]:
        return proxy_event("POST", address.inbox_path, headers={"Idempotency-Key": key}, json_body=inbox_body(number))

    def operations(self) -> list[Operation]:
        posting, state = self.posting, self.state
        return [
            Operation("inbox post (new key)", self._new_post, answered=self._keep_event),
            Operation("inbox post (same key, same body)", lambda: self._post(posting, "bench:duplicate")),
            Operation("poll (wait=0, one event)", self._poll),
            Operation("ack", self._ack),
            Operation("state read", lambda: proxy_event("GET", state.state_key_path("hot"), headers=state.auth)),
            Operation("state write (if_revision N)", self._state_write),
            Operation(
                f"state write, {_kilobytes(LARGE_STATE_VALUE)} KB value", self._large_state_write, target_ms=None
            ),
            Operation(f"state batch of {BATCH_SIZE} sets", self._batch),
            Operation("runtime append_run_record", self._append),
            Operation("runtime start_root_run", self._start, target_ms=START_TARGET_MS),
        ]

    def _new_post(self) -> dict[str, Any]:
        number = next(self.numbers)
        return self._post(self.posting, f"bench:{number}", number)

    def _keep_event(self, response: dict[str, Any]) -> None:
        if response["statusCode"] == 202:
            self.event_ids.append(_answered(response)["event"]["id"])

    def _poll(self) -> dict[str, Any]:
        query = {"after": "0", "wait": "0"}
        return proxy_event("GET", self.reading.events_path, query=query, headers=self.reading.auth)

    def _ack(self) -> dict[str, Any]:
        # Each ack takes a different event, posted by the rows before: its first acknowledgement.
        return proxy_event("POST", self.posting.ack_path(self.event_ids.pop(0)), headers=self.posting.auth)

    def _state_write(self) -> dict[str, Any]:
        body = {"value": STATE_VALUE, "if_revision": self.state_revision}
        self.state_revision += 1
        return proxy_event("PUT", self.state.state_key_path("hot"), headers=self.state.auth, json_body=body)

    def _large_state_write(self) -> dict[str, Any]:
        body = {"value": LARGE_STATE_VALUE}
        return proxy_event(
            "PUT", self.large_state.state_key_path("large"), headers=self.large_state.auth, json_body=body
        )

    def _batch(self) -> dict[str, Any]:
        revision, self.batch_revision = self.batch_revision, self.batch_revision + 1
        operations = [
            {"key": f"b{index}", "op": "set", "value": STATE_VALUE, "if_revision": revision}
            for index in range(BATCH_SIZE)
        ]
        body = {"operations": operations}
        return proxy_event("POST", self.batching.state_path, headers=self.batching.auth, json_body=body)

    def _append(self) -> dict[str, Any]:
        record = note(self.parent, f"note-{next(self.numbers)}")
        return proxy_event("POST", "/api/v1/runtime/append_run_record", json_body=wire.encode(record))

    def _start(self) -> dict[str, Any]:
        command = root_start(run_start(f"handler-root-{next(self.numbers)}", session=SESSION))
        return proxy_event("POST", "/api/v1/runtime/start_root_run", json_body=wire.encode(command))


def _kilobytes(value: Any) -> int:
    return round(len(json.dumps(value, separators=(",", ":"))) / 1000)


def measure_handler(settings: Settings, table_name: str, requests: int) -> dict[str, Table]:
    """Overhead per operation, cost per million requests, and the worst operation's profile."""
    # The batch row appends five events a request: the feed's quota is raised so that none is refused for it.
    settings = settings.replace(table_name=table_name, max_events=MAX_EVENTS_LIMIT)
    handler = Handler(settings)
    scenario = Scenario(handler)
    operations = scenario.operations()
    warmup = max(3, requests // 10)
    measured: dict[str, Samples] = {}
    for operation in operations:
        for _ in range(warmup):
            operation.answered(handler.call(operation.event()))
        samples = measured[operation.name] = Samples()
        for _ in range(requests):
            operation.answered(handler.call(operation.event(), samples))

    overhead = _overhead_table(operations, measured, requests, warmup)
    costs = _cost_table(settings, handler, operations, measured)
    targeted = [operation for operation in operations if operation.target_ms is not None]
    worst = max(targeted, key=lambda operation: percentile_ms(measured[operation.name].overheads, 50))
    profile = _profile(handler, worst, requests)
    _quiet_logger(handler.module)
    return {"handler": overhead, "handler_costs": costs, "handler_profile": profile}


def _quiet_logger(module: ModuleType) -> None:
    """The handler's Powertools logger writes the "cairn" loggers' records to stdout from now on; the
    parts after this one run Cairn's code in this process too, and their records belong on stderr, as
    before the import, not in the printed tables or `--json`."""
    logger = logging.getLogger(module.logger.name)
    logger.setLevel(logging.WARNING)
    for handler in logger.handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(sys.stderr)


def _overhead_table(operations: list[Operation], measured: dict[str, Samples], requests: int, warmup: int) -> Table:
    table = Table(
        f"Handler time per request, DynamoDB time taken out (lambda_handler in-process, DynamoDB Local, "
        f"{requests} requests each)",
        ["operation", "status", "DynamoDB calls", "total p50 ms", "total p99 ms", "DynamoDB p50 ms",
         "DynamoDB p99 ms", "overhead p50 ms", "overhead p99 ms", "overhead target p50"],
    )  # fmt: skip
    for operation in operations:
        samples = measured[operation.name]
        overheads = samples.overheads
        table.add(
            operation.name, status_text(samples.statuses), round(samples.calls / len(samples.totals), 2),
            round(percentile_ms(samples.totals, 50), 2), round(percentile_ms(samples.totals, 99), 2),
            round(percentile_ms(samples.dynamodb, 50), 2), round(percentile_ms(samples.dynamodb, 99), 2),
            round(percentile_ms(overheads, 50), 2), round(percentile_ms(overheads, 99), 2),
            "-" if operation.target_ms is None else f"<= {operation.target_ms:g} ms",
        )  # fmt: skip
    table.notes += [
        "Total: the call to cairn.entrypoints.api_handler.lambda_handler with an API Gateway REST proxy event, "
        "in a process that imported it as a Lambda container does (Powertools' logger included). DynamoDB: the "
        "time inside the client's calls (botocore's provide-client-params to after-call: serialising, the round "
        "trip to DynamoDB Local, parsing). Overhead: total minus DynamoDB, per request, then its percentiles.",
        f"Each operation is warmed by {warmup} requests first; the targets are issue 30's, printed, not checked.",
    ]
    return table


def _units(handler: Handler, operation: Operation, p50_ms: float) -> Units:
    """Request units of a few more requests of `operation`, asked of DynamoDB, with `p50_ms` of Lambda time."""
    clock = handler.clock
    read_units = write_units = 0.0
    clock.ask_capacity = True
    try:
        for _ in range(CAPACITY_REQUESTS):
            clock.reset()
            operation.answered(handler.call(operation.event()))
            read_units, write_units = read_units + clock.read_units, write_units + clock.write_units
    finally:
        clock.ask_capacity = False
    return Units(p50_ms, read_units / CAPACITY_REQUESTS, write_units / CAPACITY_REQUESTS)


def _raw_units(client: DynamoDBClient, clock: DynamoDBClock, operation: Callable[[], Any], requests: int) -> Units:
    """A raw boto3 operation's p50 (all of it, as the whole of a Lambda's time) and its request units."""
    times = []
    for _ in range(requests):
        began = time.perf_counter()
        operation()
        times.append(time.perf_counter() - began)
    clock.ask_capacity = True
    clock.reset()
    for _ in range(CAPACITY_REQUESTS):
        operation()
    clock.ask_capacity = False
    return Units(percentile_ms(times, 50), clock.read_units / CAPACITY_REQUESTS, clock.write_units / CAPACITY_REQUESTS)


def _raw_costs(settings: Settings, requests: int) -> dict[str, Units]:
    """The raw transactions of the inbox and state baselines, as the same Lambda would run them."""
    client = make_client(settings)
    clock = DynamoDBClock().attach(client)
    for head in ("HANDLER-RAW#inbox", "HANDLER-RAW#state"):
        client.put_item(TableName=settings.table_name, Item={**key(head, "META"), "last_seq": n(0)})
    appender = RawAppender(client, settings.table_name, "HANDLER-RAW#inbox")
    counters = RawCounters(client, settings.table_name, "HANDLER-RAW#state")
    return {
        "inbox post (new key)": _raw_units(client, clock, appender.append, requests),
        "state write (if_revision N)": _raw_units(client, clock, lambda: counters.increment("hot"), requests),
    }


def _cost_table(
    settings: Settings, handler: Handler, operations: list[Operation], measured: dict[str, Samples]
) -> Table:
    requests = len(next(iter(measured.values())).totals)
    raw = _raw_costs(settings, requests)
    table = Table(
        f"Cost per million requests (Lambda arm64 at {API_MEMORY_MB} MB for the handler's p50, DynamoDB on-demand "
        "request units)",
        ["operation", "Lambda ms billed", "read units", "write units", "Lambda $", "DynamoDB $", "$ per million",
         "raw boto3 $ per million", "x raw"],
    )  # fmt: skip
    for operation in operations:
        units = _units(handler, operation, percentile_ms(measured[operation.name].totals, 50))
        baseline = raw.get(operation.name)
        table.add(
            operation.name, math.ceil(units.ms), round(units.read_units, 2), round(units.write_units, 2),
            f"{units.lambda_cost * 1_000_000:.2f}", f"{units.dynamodb_cost * 1_000_000:.2f}",
            f"{units.per_million:.2f}",
            f"{baseline.per_million:.2f} ({math.ceil(baseline.ms)} ms, {baseline.write_units:g} WRU, "
            f"{baseline.read_units:g} RRU)" if baseline else "-",
            round(units.per_million / baseline.per_million, 2) if baseline else "-",
        )  # fmt: skip
    table.notes += [
        f"Prices (us-east-1 list, stated in bench/handler.py with their pages): Lambda arm64 ${LAMBDA_PER_GB_SECOND} "
        f"per GB-second and ${LAMBDA_PER_REQUEST * 1e6:.2f} per million requests; DynamoDB on-demand "
        f"${DYNAMODB_PER_WRITE_UNIT * 1e6:.3f} per million write units and ${DYNAMODB_PER_READ_UNIT * 1e6:.3f} "
        "per million read units. API Gateway's own charge per request is the same for both and left out.",
        f"Request units: the mean of {CAPACITY_REQUESTS} more requests. Reads and single writes as DynamoDB Local "
        "reports them (ReturnConsumedCapacity=TOTAL); a TransactWriteItems counted from its request by AWS's "
        "rule, 2 write units per action per started KB, whether it commits or not (DynamoDB Local reports "
        "fewer; the duplicate post's transaction is refused by its idempotency record's condition).",
        "Lambda time is DynamoDB Local's round trips plus the handler's overhead; against DynamoDB in AWS the "
        "round trips differ, the overhead does not. Raw boto3: bench.baseline's transaction (head Update + event "
        "Put) and bench.cas_baseline's increment (GetItem, then key Update + head Update + event Put), timed "
        "whole, as if a Lambda did only that.",
    ]
    return table


def _profile(handler: Handler, operation: Operation, requests: int) -> Table:
    """Where `operation`'s requests spend their own time, by function, under cProfile."""
    # CPU time, not the wall clock: on a shared machine a moment without the core would be charged,
    # averaged over the requests, to whichever function it fell in.
    profiler = handler.clock.profiler = cProfile.Profile(time.process_time)
    try:
        for _ in range(requests):
            event = operation.event()
            profiler.enable()
            response = handler.call(event)
            profiler.disable()
            operation.answered(response)
    finally:
        handler.clock.profiler = None
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:PROFILE_ROWS]
    table = Table(
        f"Profile of the largest overhead with a target: {operation.name} (cProfile, {requests} requests)",
        ["function", "calls per request", "own µs per request", "cumulative µs per request"],
    )
    for (filename, line, name), (_, calls, own, cumulative, _) in rows:
        table.add(
            _where(filename, line, name), round(calls / requests, 1), round(own * 1e6 / requests, 1),
            round(cumulative * 1e6 / requests, 1),
        )  # fmt: skip
    table.notes += [
        "Only the time outside the DynamoDB client's calls is profiled (the clock pauses cProfile from "
        "provide-client-params to after-call): the overhead, not the round trips. Times are the process's CPU "
        "time, means per request. Own time: in the function itself, not in what it calls. cProfile slows "
        "every Python call, so the shares matter, not the sums.",
        "Own time by package: " + _by_package(stats),
    ]
    return table


def _by_package(stats: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]) -> str:
    """Each top-level package's share of the profiled own time, largest first."""
    shares: dict[str, float] = {}
    for (filename, line, name), (_, _, own, _, _) in stats.items():
        package = "built-ins" if filename == "~" else _where(filename, line, name).split("/", 1)[0]
        package = package.split(":", 1)[0].removesuffix(".py")
        shares[package] = shares.get(package, 0.0) + own
    total = sum(shares.values()) or 1.0
    largest = sorted(shares.items(), key=lambda share: share[1], reverse=True)[:8]
    return ", ".join(f"{package} {100 * own / total:.0f} %" for package, own in largest)


def _where(filename: str, line: int, name: str) -> str:
    """A function's place without this machine's paths: the package path after site-packages or functions."""
    if filename == "~":
        return name
    filename = re.sub(r".*/(?:site-packages|functions|lib/python[\d.]+)/", "", filename)
    return f"{filename}:{line} {name}"
