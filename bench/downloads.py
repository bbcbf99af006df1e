"""What streaming costs an attachment download, against the buffered answer in the same process.

Both paths run the resolver the API function runs, on DynamoDB Local and the
local raw message folder. Buffered: `resolve` returns the answer with a
base64 body, decoded as API Gateway would. Streamed: the download function's
loop (`cairn.entrypoints.streaming.handle_next`) takes the same event from a
Runtime API endpoint on 127.0.0.1 and posts the answer chunked; the time runs until
the endpoint has read the last byte. In AWS only the streamed path can carry
more than about 4.4 MB; here both run at every size, so the ratio shows what
the loop adds.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from bench.report import Table
from bench.timing import percentile_ms
from cairn.dynamodb.raw_messages import raw_message_store
from cairn.email.ingest import Delivery
from cairn.entrypoints.streaming import RuntimeApi, handle_next
from cairn.services import Services
from cairn.settings import Settings
from tests.support.lambda_client import LambdaClient, path_of
from tests.support.mail import new_message_id
from tests.support.runtime_api import FakeRuntimeApi

SIZES = (1_000_000, 4_000_000, 8_000_000)


def measure_downloads(settings: Settings, table_name: str, blob_dir: Path, trials: int) -> Table:
    settings = settings.replace(table_name=table_name, email_blob_dir=blob_dir)
    client = LambdaClient(Services.build(settings))
    created = client.provision()
    token = created["credentials"]["read_token"]
    table = Table(
        f"Attachment downloads: buffered answer vs response streaming (resolver on DynamoDB Local, {trials} trials)",
        ["attachment", "buffered p50 ms", "streamed p50 ms", "streamed p99 ms", "streamed MB/s at p50",
         "streamed / buffered"],
    )  # fmt: skip
    with FakeRuntimeApi() as endpoint:
        runtime = RuntimeApi(endpoint.address)
        for size in SIZES:
            event = _download_event(client, created, token, _deliver(client, created, size))

            def buffered(event: dict[str, Any] = event, size: int = size) -> None:
                answer = client.app.resolve(event, {})
                assert len(base64.b64decode(answer["body"])) == size

            def streamed(event: dict[str, Any] = event, size: int = size) -> None:
                endpoint.invoke(event)
                handle_next(runtime, client.app.resolve, {})
                assert len(endpoint.next_post().streamed()[1]) == size

            buffered_ms = percentile_ms(_timed(buffered, trials), 50)
            streamed_times = _timed(streamed, trials)
            streamed_ms = percentile_ms(streamed_times, 50)
            table.add(
                f"{size / 1e6:.0f} MB", buffered_ms, streamed_ms, percentile_ms(streamed_times, 99),
                size / 1e6 / (streamed_ms / 1000), f"{streamed_ms / buffered_ms:.2f}",
            )  # fmt: skip
    table.notes += [
        "Each download reads the stored message again and parses it (nothing is copied at ingest); the "
        "message is the attachment plus a short text part, base64 in MIME.",
        "Streamed includes the endpoint on 127.0.0.1 reading and de-chunking the body in Python, which Lambda's "
        "own Runtime API does outside the function.",
    ]
    return table


def _deliver(client: LambdaClient, created: dict[str, Any], size: int) -> str:
    """Mail with a `size`-byte attachment reaches the address; returns the event id."""
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "scanner@example.com", created["address"]["email"], "Scan"
    message.set_content("The scan is attached.")
    message.add_attachment(os.urandom(size), maintype="application", subtype="zip", filename="scan.zip")
    message_id = new_message_id()
    raw_message_store(client.services.settings).save(message_id, message.as_bytes())
    [result] = client.services.email.ingest(
        Delivery(message_id=message_id, recipients=[created["address"]["email"]])
    ).values()
    return result.events[0].id


def _download_event(client: LambdaClient, created: dict[str, Any], token: str, event_id: str) -> dict[str, Any]:
    url = f"{path_of(created['endpoints']['events_url'])}/{event_id}/attachments/att_1"
    return client.event("GET", url, token=token)


def _timed(download: Callable[[], None], trials: int) -> list[float]:
    download()  # warm
    latencies = []
    for _ in range(trials):
        began = time.perf_counter()
        download()
        latencies.append(time.perf_counter() - began)
    return latencies
