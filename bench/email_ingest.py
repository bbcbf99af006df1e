"""How long the email ingest takes for a 1 MB message with attachments.

The ingest is the one both receivers run (`EmailIngest` from the services,
as the SES handler and the SMTP listener of `cairn serve` call it), on a
counted DynamoDB client and the local raw message folder. Each trial stores a
new copy of the message under a new id first, as the receiver does before it
hands over; only the ingest is timed: reading the stored message, parsing the
MIME, and appending the `email.received` event to each recipient's feed.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path

from bench.calls import CallCounter, status_text
from bench.report import Table
from bench.timing import percentile_ms
from cairn.addresses.models import AppendResult
from cairn.dynamodb.client import make_client
from cairn.dynamodb.raw_messages import raw_message_store
from cairn.email.ingest import Delivery
from cairn.services import Services
from cairn.settings import Settings
from tests.support.mail import new_message_id

# Raw sizes after base64: about 1 MB in all.
ATTACHMENTS = (("scan.pdf", "application", "pdf", 560_000), ("readings.csv", "text", "csv", 160_000))
TEXT = "Hello,\n\nThe signed scan and this month's readings are attached.\n\nRegards,\nFacilities\n"


def measure_ingest(settings: Settings, table_name: str, blob_dir: Path, trials: int) -> Table:
    # The per-address mail rate would refuse most trials: the ingest is measured, not the limit.
    settings = settings.replace(table_name=table_name, email_blob_dir=blob_dir, email_rate_per_minute=1_000_000)
    client = make_client(settings)
    counter = CallCounter(client)
    services = Services.build(settings, client=client)
    ingest, raw_messages = services.email, raw_message_store(settings)
    recipients = [_provision(services) for _ in range(2)]
    raw = _message(recipients[0])

    def deliver(to: list[str]) -> Callable[[], Delivery]:
        def new_delivery() -> Delivery:
            message_id = new_message_id()
            raw_messages.save(message_id, raw)
            return Delivery(message_id=message_id, recipients=to)

        return new_delivery

    redelivered = deliver(recipients[:1])()
    ingest.ingest(redelivered)
    rows: list[tuple[str, Callable[[], Delivery]]] = [
        ("new message, 1 address", deliver(recipients[:1])),
        ("new message, 2 addresses", deliver(recipients)),
        ("redelivery (same message id)", lambda: redelivered),
    ]
    table = Table(
        f"Email ingest of a {len(raw) / 1e6:.2f} MB message with {len(ATTACHMENTS)} attachments "
        f"(EmailIngest, DynamoDB Local, local raw message folder, {trials} trials)",
        ["delivery", "result", "DynamoDB calls per message", "p50 ms", "p99 ms", "MB/s at p50"],
    )
    for name, delivery in rows:
        ingest.ingest(delivery())  # warm: the first append to an address learns its head
        latencies = []
        outcomes: Counter[str] = Counter()
        counter.take()
        for _ in range(trials):
            prepared = delivery()
            began = time.perf_counter()
            results = ingest.ingest(prepared)
            latencies.append(time.perf_counter() - began)
            outcomes[_outcome(results)] += 1
        p50 = percentile_ms(latencies, 50)
        table.add(
            name, status_text(outcomes), counter.take(per=trials), p50, percentile_ms(latencies, 99),
            len(raw) / 1e6 / (p50 / 1000),
        )  # fmt: skip
    table.notes += [
        "Attachments: "
        + ", ".join(f"{name} ({size:,} bytes)" for name, _, _, size in ATTACHMENTS)
        + "; plus a text and an HTML body. The event lists the attachments; their bytes stay in the raw message.",
        "Timed: the ingest alone (read the stored message, parse, one append per address). Storing the "
        "message first is the receiver's work (SES's S3 action, the SMTP listener) and is not timed.",
        "Redelivery: the same message id again, as SES retries; the event exists and no second one is made.",
    ]
    return table


def _provision(services: Services) -> str:
    provisioned = services.provisioning.provision(client_ip="127.0.0.1", task_id="bench")
    return provisioned.record.email


def _message(recipient: str) -> bytes:
    # Random bytes, so nothing in the path can take a shortcut on repetitive content.
    generator = random.Random(7)
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "facilities@example.com", recipient, "Scan and readings"
    message.set_content(TEXT)
    message.add_alternative(f"<html><body><pre>{TEXT}</pre></body></html>", subtype="html")
    for filename, maintype, subtype, size in ATTACHMENTS:
        message.add_attachment(generator.randbytes(size), maintype=maintype, subtype=subtype, filename=filename)
    return message.as_bytes()


def _outcome(results: dict[str, AppendResult]) -> str:
    if not results:
        return "no event"
    return "duplicate" if all(result.duplicate for result in results.values()) else "appended"
