"""How soon a waiting long-poll answers after an inbox post commits."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from bench import agent
from bench.address import Address
from bench.report import Table
from bench.server import CairnServer
from bench.timing import percentile_ms

LONG_POLL_SECONDS = 20
# Long enough for the poll to pass its first (empty) read and start waiting.
SETTLE_SECONDS = 0.1


def measure_wakeup(server: CairnServer, trials: int) -> Table:
    post_latency: list[float] = []
    wakeup: list[float] = []
    delivery: list[float] = []
    missed = 0
    with server.client() as poster, server.client() as reader, ThreadPoolExecutor(1) as background:
        address = agent.provision(poster)
        last = 0
        for _ in range(trials):
            waiting = background.submit(_long_poll, reader, address, last)
            time.sleep(SETTLE_SECONDS)
            sent = time.perf_counter()
            reply = agent.post(poster, address)
            posted = time.perf_counter()
            events, answered = waiting.result()
            last = reply.json()["event"]["sequence"]
            if [event["sequence"] for event in events] != [last]:
                missed += 1
                continue
            post_latency.append(posted - sent)
            wakeup.append(answered - posted)
            delivery.append(answered - sent)

    table = Table(
        f"Wake-up of a waiting long-poll (wait={LONG_POLL_SECONDS}), cairn serve, {trials} trials",
        ["interval", "p50 ms", "p99 ms", "max ms"],
    )
    for name, samples in [
        ("inbox POST, sent -> answered", post_latency),
        ("POST answered -> long-poll answered", wakeup),
        ("POST sent -> long-poll answered", delivery),
    ]:
        table.add(name, percentile_ms(samples, 50), percentile_ms(samples, 99), percentile_ms(samples, 100))
    table.notes.append(
        "The poll waits on its own connection; a negative wake-up means the poll answered before the POST did "
        "(the server wakes waiters as soon as the append commits)."
    )
    if missed:
        table.notes.append(f"{missed} trials were left out: the poll did not answer with exactly the posted event.")
    return table


def _long_poll(client: httpx.Client, address: Address, after: int) -> tuple[list[dict[str, Any]], float]:
    reply = agent.poll(client, address, after=after, wait=LONG_POLL_SECONDS)
    return reply.json().get("events", []), time.perf_counter()
