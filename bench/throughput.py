"""Requests per second over real HTTP against `cairn serve`, several clients at once."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from bench import agent
from bench.address import Address
from bench.report import Table
from bench.server import CairnServer
from bench.timing import Operation, run_load

CLIENTS = 8

# Scenario names the baseline comparison refers to.
POST_1_TO_1 = "inbox post, 1 client, 1 address"
POST_8_TO_1 = f"inbox post, {CLIENTS} clients, 1 address"
POST_8_TO_8 = f"inbox post, {CLIENTS} clients, {CLIENTS} addresses"
POLL_8_TO_8 = f"poll wait=0, {CLIENTS} clients, {CLIENTS} addresses"


def measure_throughput(server: CairnServer, seconds: float, warmup: float) -> Table:
    clients = [server.client() for _ in range(CLIENTS)]
    try:
        one = agent.provision(clients[0])
        separate = [agent.provision(client) for client in clients]
        # The posting rows fill `separate`; polls read addresses that keep one
        # event each, so every answer is the same small page.
        readable = [agent.provision(client) for client in clients]
        for client, address in zip(clients, readable, strict=True):
            agent.post(client, address).raise_for_status()

        scenarios: list[tuple[str, list[Operation]]] = [
            (POST_1_TO_1, [_posting(clients[0], one)]),
            (POST_8_TO_1, [_posting(client, one) for client in clients]),
            (POST_8_TO_8, [_posting(client, address) for client, address in zip(clients, separate, strict=True)]),
            (POLL_8_TO_8, [_polling(client, address) for client, address in zip(clients, readable, strict=True)]),
        ]
        results = {name: run_load(operations, seconds, warmup) for name, operations in scenarios}
    finally:
        for client in clients:
            client.close()

    table = Table(
        f"Throughput over HTTP, cairn serve on DynamoDB Local ({seconds:g} s per row after {warmup:g} s warm-up)",
        ["scenario", "requests", "req/s", "p50 ms", "p99 ms", "outcomes"],
    )
    for name, result in results.items():
        table.add(name, result.operations, result.per_second, result.p50_ms(), result.p99_ms(), result.outcome_text())
    table.notes += [
        "Each client is one thread with one keep-alive connection, sending its next request when the last answers.",
        "Posts carry a new Idempotency-Key each (head update + event + idempotency record in one transaction).",
        "Polls read after=0 on an address holding one event.",
        "Rate limits and the feed quota are raised for the server, so no request is refused for them.",
    ]
    return table


def _posting(client: httpx.Client, address: Address) -> Operation:
    return _status_of(lambda: agent.post(client, address))


def _polling(client: httpx.Client, address: Address) -> Operation:
    return _status_of(lambda: agent.poll(client, address, after=0, wait=0))


def _status_of(request: Callable[[], httpx.Response]) -> Operation:
    return lambda: str(request().status_code)
