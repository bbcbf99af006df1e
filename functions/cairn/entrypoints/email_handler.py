"""Lambda entry point of inbound email.

The SES receipt rule first stores the raw message in S3, then invokes this
function with the receipt (no body). Each record becomes one event in the
feed of every Cairn address among its recipients.
"""

from __future__ import annotations

from cairn.entrypoints.container_init import container_init

with container_init():
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.utilities.data_classes import SESEvent, event_source
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from cairn.email.ses import delivery
    from cairn.services import Services
    from cairn.settings import get_settings

    logger = Logger(service="cairn")

    # Built at cold start and reused by every invocation of this container.
    services = Services.build(get_settings())


@logger.inject_lambda_context
@event_source(data_class=SESEvent)
def lambda_handler(event: SESEvent, context: LambdaContext) -> None:
    for record in event.records:
        incoming = delivery(record)
        results = services.email.ingest(incoming)
        logger.info(
            "email ingested",
            extra={
                "message_id": incoming.message_id,
                "recipients": len(incoming.recipients),
                "new_events": sum(not result.duplicate for result in results.values()),
            },
        )
