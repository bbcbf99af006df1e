"""Lambda entry points of outbound mail outcomes: SES's reports, and the sweep of deadlines passed.

`lambda_handler`: SES publishes the events of Cairn's sends (configuration
set → SNS topic → this function). Each delivery, bounce, complaint or
rejection becomes the send's one outcome event, in the feed slot the send
reserved; a repeated notification is a duplicate and changes nothing.
`sweep_handler` runs on a schedule (a function of its own) and records
`email.outcome_unknown` for the sends SES never reported on by their deadline.
"""

from __future__ import annotations

from typing import Any

from cairn.entrypoints.container_init import container_init

with container_init():
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.utilities.data_classes import SNSEvent, event_source
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from cairn.email.ses_outcomes import outcome_report
    from cairn.services import Services
    from cairn.settings import get_settings

    logger = Logger(service="cairn")

    # Built at cold start and reused by every invocation of this container.
    services = Services.build(get_settings())

# Stop sweeping this long before Lambda's deadline: one outcome's append may take its whole 10 s budget.
_SWEEP_MARGIN_MS = 15_000


@logger.inject_lambda_context
@event_source(data_class=SNSEvent)
def lambda_handler(event: SNSEvent, context: LambdaContext) -> None:
    for record in event.records:
        report = outcome_report(record.sns.message)
        if report is None:
            logger.info("not an outcome of a Cairn send", extra={"sns_message_id": record.sns.message_id})
            continue
        result = services.sending.record_outcome(
            report.address_id,
            report.send_event_id,
            report.outcome,
            message_id=report.message_id,
            provider_message_id=report.provider_message_id,
            detail=report.detail,
            attempt=report.attempt,
        )
        logger.info(
            "outcome recorded",
            extra={
                "address_id": report.address_id,
                "outcome": report.outcome,
                "duplicate": None if result is None else result.duplicate,
            },
        )


@logger.inject_lambda_context
def sweep_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    settled = services.outcome_sweep.run(until=lambda: context.get_remaining_time_in_millis() < _SWEEP_MARGIN_MS)
    logger.info("outcome deadlines swept", extra={"settled": settled})
    return {"settled": settled}
