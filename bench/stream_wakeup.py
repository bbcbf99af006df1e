"""How soon an open event stream (server-sent events) carries an inbox post after the post commits."""

from __future__ import annotations

import queue
import threading
import time

import httpx

from bench import agent
from bench.address import Address
from bench.report import Table
from bench.server import CairnServer
from bench.timing import percentile_ms

# Between posts, so each one finds the stream idle and waiting, as a real wake-up does.
SETTLE_SECONDS = 0.05
ARRIVAL_TIMEOUT_SECONDS = 10


def measure_stream_wakeup(server: CairnServer, trials: int) -> Table:
    post_latency: list[float] = []
    wakeup: list[float] = []
    delivery: list[float] = []
    missed = 0
    with server.client() as poster, server.client() as reader:
        address = agent.provision(poster)
        arrivals: queue.Queue[tuple[int, float]] = queue.Queue()
        stream = threading.Thread(target=_read_stream, args=(reader, address, arrivals), daemon=True)
        stream.start()
        time.sleep(0.2)  # the stream's first read finds nothing and starts waiting
        for _ in range(trials):
            time.sleep(SETTLE_SECONDS)
            sent = time.perf_counter()
            reply = agent.post(poster, address)
            posted = time.perf_counter()
            sequence = reply.json()["event"]["sequence"]
            try:
                arrived_sequence, arrived = arrivals.get(timeout=ARRIVAL_TIMEOUT_SECONDS)
            except queue.Empty:
                missed += 1
                continue
            if arrived_sequence != sequence:
                missed += 1
                continue
            post_latency.append(posted - sent)
            wakeup.append(arrived - posted)
            delivery.append(arrived - sent)
        reader.close()  # ends the stream; the reading thread stops with it

    table = Table(
        f"Wake-up of an open event stream (text/event-stream), cairn serve, {trials} trials",
        ["interval", "p50 ms", "p99 ms", "max ms"],
    )
    for name, samples in [
        ("inbox POST, sent -> answered", post_latency),
        ("POST answered -> SSE event read", wakeup),
        ("POST sent -> SSE event read", delivery),
    ]:
        table.add(name, percentile_ms(samples, 50), percentile_ms(samples, 99), percentile_ms(samples, 100))
    table.notes.append(
        "One stream stays open for every trial (no reconnect per event, unlike a long-poll); the time is taken "
        "when the client has read the event's frame. A negative wake-up means the frame arrived before the "
        "POST's answer."
    )
    if missed:
        table.notes.append(f"{missed} trials were left out: the stream did not carry exactly the posted event.")
    return table


def _read_stream(client: httpx.Client, address: Address, arrivals: queue.Queue[tuple[int, float]]) -> None:
    headers = {**address.auth, "Accept": "text/event-stream"}
    try:
        with client.stream("GET", address.events_path, headers=headers) as response:
            for line in response.iter_lines():
                if line.startswith("id: "):
                    arrivals.put((int(line.removeprefix("id: ")), time.perf_counter()))
    except httpx.HTTPError:
        pass  # the client was closed: the measurement is over
