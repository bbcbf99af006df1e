"""Compare-and-set on state keys as an agent does it, and how fast it goes over HTTP.

An increment reads a key, writes the value plus one with `if_revision` set to
the revision it read, and on 409 reads again and retries. One successful
increment is one write; the 409s met on the way are its conflicts. After a
scenario the counters must hold exactly the increments that succeeded.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from bench import agent
from bench.address import Address
from bench.calls import CallCounter, CallCounts
from bench.gateway import Reply
from bench.report import Table
from bench.server import CairnServer
from bench.timing import LoadResult, run_load

CLIENTS = 8
KEYS_EACH = 4

# Scenario names the baseline comparison refers to.
HOT_KEY = f"{CLIENTS} clients, 1 key"
OWN_KEYS = f"{CLIENTS} clients, {CLIENTS * KEYS_EACH} keys ({KEYS_EACH} each)"

# method, path, JSON body (None for none) -> reply
Send = Callable[[str, str, Any], Reply]


def keys_by_client(scenario: str) -> list[list[str]]:
    """The keys each client increments in turn."""
    if scenario == HOT_KEY:
        return [["hot"]] * CLIENTS
    return [[f"c{client}.k{index}" for index in range(KEYS_EACH)] for client in range(CLIENTS)]


class Counters(Protocol):
    def increment(self, key: str) -> int:
        """Add one to the counter at `key` by compare-and-set; returns the conflicts met."""

    def value(self, key: str) -> int: ...


class StateCounters:
    """Counters in an address's state, through the HTTP API (or the resolver)."""

    def __init__(self, send: Send, address: Address) -> None:
        self._send = send
        self._address = address

    def increment(self, key: str) -> int:
        path = self._address.state_key_path(key)
        conflicts = 0
        while True:
            value, revision = self._read(path)
            wrote = self._send("PUT", path, {"value": value + 1, "if_revision": revision})
            if wrote.status in (200, 201):
                return conflicts
            if wrote.status != 409:
                raise RuntimeError(f"PUT {path} answered {wrote.status}: {wrote.body}")
            conflicts += 1

    def value(self, key: str) -> int:
        return self._read(self._address.state_key_path(key))[0]

    def _read(self, path: str) -> tuple[int, int]:
        """The counter and its revision; a key not yet written is 0 at revision 0 (create only)."""
        read = self._send("GET", path, None)
        if read.status == 404:
            return 0, 0
        if read.status != 200:
            raise RuntimeError(f"GET {path} answered {read.status}: {read.body}")
        return read.body["value"], read.body["revision"]


def http_sender(client: httpx.Client, address: Address) -> Send:
    def send(method: str, path: str, body: Any) -> Reply:
        reply = client.request(method, path, json=body, headers=address.auth)
        return Reply(reply.status_code, reply.json())

    return send


class CasWriter:
    """One client incrementing its keys in turn; counts its writes and conflicts."""

    def __init__(self, counters: Counters, keys: list[str]) -> None:
        self.counters = counters
        self.keys = keys
        self._turns = itertools.cycle(keys)
        self.writes = 0
        self.conflicts = 0
        # Every increment that succeeded, warm-up included: what the counters must hold.
        self.landed = 0

    def write(self) -> str:
        self.conflicts += self.counters.increment(next(self._turns))
        self.writes += 1
        self.landed += 1
        return "ok"

    def reset(self) -> None:
        self.writes = self.conflicts = 0


@dataclass(frozen=True)
class CasRun:
    load: LoadResult
    writes: int
    conflicts: int
    # The counters hold exactly the increments that succeeded.
    exact: bool
    # DynamoDB calls per write, when the writers' client was counted.
    calls: CallCounts | None = None

    @property
    def conflicts_per_write(self) -> float:
        return round(self.conflicts / self.writes, 2) if self.writes else float("nan")


def run_cas(writers: list[CasWriter], seconds: float, warmup: float, counter: CallCounter | None = None) -> CasRun:
    """Warm up, count, then check that no increment was lost or doubled."""
    operations = [writer.write for writer in writers]
    run_load(operations, warmup)
    for writer in writers:
        writer.reset()
    if counter is not None:
        counter.take()
    load = run_load(operations, seconds)
    writes = sum(writer.writes for writer in writers)
    calls = counter.take(per=writes) if counter is not None and writes else None
    keys = {key for writer in writers for key in writer.keys}
    held = sum(writers[0].counters.value(key) for key in keys)
    return CasRun(
        load=load,
        writes=writes,
        conflicts=sum(writer.conflicts for writer in writers),
        exact=held == sum(writer.landed for writer in writers),
        calls=calls,
    )


def measure_cas(server: CairnServer, seconds: float, warmup: float) -> tuple[Table, dict[str, CasRun]]:
    clients = [server.client() for _ in range(CLIENTS)]
    try:
        results: dict[str, CasRun] = {}
        for scenario in (HOT_KEY, OWN_KEYS):
            address = agent.provision(clients[0])
            writers = [
                CasWriter(StateCounters(http_sender(client, address), address), keys)
                for client, keys in zip(clients, keys_by_client(scenario), strict=True)
            ]
            results[scenario] = run_cas(writers, seconds, warmup)
    finally:
        for client in clients:
            client.close()

    table = Table(
        f"State compare-and-set over HTTP, cairn serve on DynamoDB Local ({seconds:g} s per row after "
        f"{warmup:g} s warm-up)",
        ["scenario", "writes", "writes/s", "p50 ms", "p99 ms", "conflicts per write", "counters exact", "outcomes"],
    )
    for name, run in results.items():
        load = run.load
        table.add(
            name, run.writes, load.per_second, load.p50_ms(), load.p99_ms(), run.conflicts_per_write,
            "yes" if run.exact else "NO", load.outcome_text(),
        )  # fmt: skip
    table.notes += [
        "A write is one successful increment: GET the key, PUT value+1 with if_revision, and on 409 read again "
        "and retry; its latency includes the retries. Conflicts are the 409s met per successful write.",
        "Each client is one thread with one keep-alive connection. All keys of a row live in one new address, "
        "so every write also moves that address's head (each change appends a state.updated event).",
        "Counters exact: after the row, the keys hold exactly the increments that succeeded (warm-up included).",
    ]
    return table, results
