"""The processor time an agent pays to make an SDK object, before it sends anything.

An `Address` or `Inbox` made without a shared `HttpClient` makes its own
client. Each is timed beside the client httpx makes by default, in the same
process and in turns, so the ratio is what sharing the TLS context
(`cairn/tls.py`) saves each time.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import httpx

from bench.report import Table
from cairn.client import Address, Inbox
from cairn.client.http import HttpClient
from cairn.runtime.http import HttpRuntimeStore
from cairn.tls import verified_context

BASE_URL = "http://127.0.0.1:8787"
ROUNDS = 40


def measure_client_costs(rounds: int = ROUNDS) -> Table:
    """Median processor time per object made and closed, in turns with a default `httpx.Client`."""
    verified_context()  # made once per process, as the first object an agent makes would make it
    makers: dict[str, Callable[[], object]] = {
        "httpx.Client() (baseline: httpx's defaults)": lambda: httpx.Client().close(),
        "HttpClient()": lambda: HttpClient().close(),
        "Address.connect(...)": lambda: Address.connect(BASE_URL, "addr_" + "0" * 24, "token").close(),
        "Inbox(url)": lambda: Inbox(f"{BASE_URL}/api/v1/inbox/addr/secret").close(),
        "HttpRuntimeStore(url)": lambda: HttpRuntimeStore(BASE_URL).close(),
    }
    times: dict[str, list[float]] = {name: [] for name in makers}
    for _ in range(rounds):
        for name, make in makers.items():
            started = time.process_time()
            make()
            times[name].append(time.process_time() - started)
    baseline = statistics.median(times[next(iter(makers))])
    table = Table("SDK objects made (processor time, no request)", ["object", "p50 ms", "x baseline"])
    for name, taken in times.items():
        median = statistics.median(taken)
        table.add(name, median * 1000, f"{median / baseline:.3f}")
    table.notes.append(
        f"{rounds} of each, in turns, in one process; Cairn's share one TLS context, httpx's default makes one "
        "and loads certifi's roots into it"
    )
    return table
