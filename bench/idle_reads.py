"""DynamoDB calls while a reader waits on an idle feed with Lambda's waiter: long-polls against one event stream.

In Lambda no notification crosses instances, so a waiting reader re-reads
the feed (`PollingWaiter`: after 50 ms, doubling to 1 s), whether it is one
long-poll or one event stream; a stream also checks its address once per
heartbeat. What a stream saves is requests and reconnects, not reads.
"""

from __future__ import annotations

from bench.address import Address
from bench.calls import CairnProcess
from bench.gateway import stream
from bench.report import Table
from cairn.settings import Settings

# One long-poll covers it (`wait` is at most 25 s).
IDLE_SECONDS = 20


def measure_idle_reads(settings: Settings, seconds: int = IDLE_SECONDS) -> Table:
    process = CairnProcess(settings.replace(max_stream_seconds=seconds))
    reply = process.provision()
    address = Address.from_provisioned(reply.body)
    process.counter.take()

    process.request("GET", address.events_path, query={"wait": str(seconds)}, headers=address.auth)
    polls = process.counter.take()

    chunks = stream(process.app, address.events_path, headers={**address.auth, "Accept": "text/event-stream"})
    heartbeats = sum(chunk.startswith(b":") for chunk in chunks)
    streamed = process.counter.take()

    table = Table(
        f"DynamoDB calls while a reader waits {seconds} s on an idle feed, Lambda's waiter",
        ["reader", "calls", "per minute", "by operation"],
    )
    for name, counts in [(f"one long-poll (wait={seconds})", polls), (f"one event stream ({seconds} s)", streamed)]:
        table.add(name, counts.total, round(counts.total * 60 / seconds, 1), str(counts))
    table.notes.append(
        f"The stream sent {heartbeats} heartbeats; each also re-reads the address head. Under `cairn serve` "
        "both wait on an in-process notification instead and re-read only every 5 s."
    )
    return table
