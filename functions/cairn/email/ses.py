"""The SES receipt event as SES really sends it.

Powertools' `SesModel` is the base; three gaps would refuse or blind real
deliveries, so they are widened here:

* the DKIM verdict is sent but not modelled;
* a verdict is `DISABLED` when the receipt rule does not scan;
* common headers a message lacks are left out (a mail without a Subject
  has no `subject`), which the model requires. Cairn reads headers from the
  stored message itself, so they are kept only as sent.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.parser.models import (
    SesMail,
    SesMessage,
    SesModel,
    SesReceipt,
    SesReceiptVerdict,
    SesRecordModel,
)

from cairn.email.ingest import Delivery, Verdicts


class ReceiptVerdict(SesReceiptVerdict):
    status: str  # type: ignore[assignment]


class Receipt(SesReceipt):
    spamVerdict: ReceiptVerdict
    virusVerdict: ReceiptVerdict
    spfVerdict: ReceiptVerdict
    dkimVerdict: ReceiptVerdict | None = None
    dmarcVerdict: ReceiptVerdict


class Mail(SesMail):
    commonHeaders: dict[str, Any]  # type: ignore[assignment]


class Message(SesMessage):
    mail: Mail
    receipt: Receipt


class Record(SesRecordModel):
    ses: Message


class SesReceiptEvent(SesModel):
    # Narrowing a field is how pydantic models refine one another; mypy sees a mutable attribute change type.
    Records: list[Record]  # type: ignore[assignment]


def delivery(record: Record) -> Delivery:
    """What ingest needs from one record: the stored message and its recipients."""
    receipt = record.ses.receipt

    def status(verdict: ReceiptVerdict | None) -> str | None:
        return None if verdict is None else verdict.status.lower()

    return Delivery(
        message_id=record.ses.mail.messageId,
        recipients=receipt.recipients,
        verdicts=Verdicts(
            spf=status(receipt.spfVerdict),
            dkim=status(receipt.dkimVerdict),
            dmarc=status(receipt.dmarcVerdict),
            spam=status(receipt.spamVerdict),
            virus=status(receipt.virusVerdict),
        ),
    )
