"""What Cairn reads of the SES receipt event, as SES really sends it.

Powertools' `SESEvent` data class wraps the event without a model to pass,
so nothing SES sends is refused for its shape (and the container imports no
pydantic). Two fields its accessors would miss on real deliveries are read
with care here:

* the DKIM verdict is not always sent;
* a verdict is `DISABLED` when the receipt rule does not scan.

Common headers a message lacks are left out by SES (a mail without a Subject
has no `subject`); Cairn reads headers from the stored message itself.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes.ses_event import SESEventRecord

from cairn.email.ingest import Delivery, Verdicts


def delivery(record: SESEventRecord) -> Delivery:
    """What ingest needs from one record: the stored message, its recipients and SES's verdicts."""
    receipt = record.ses.receipt

    def status(verdict: str) -> str | None:
        found: Any = receipt.get(verdict)
        return None if found is None else str(found["status"]).lower()

    return Delivery(
        message_id=record.ses.mail.message_id,
        recipients=list(receipt.recipients),
        verdicts=Verdicts(
            spf=status("spfVerdict"),
            dkim=status("dkimVerdict"),
            dmarc=status("dmarcVerdict"),
            spam=status("spamVerdict"),
            virus=status("virusVerdict"),
        ),
    )
