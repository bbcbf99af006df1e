"""Lambda entry points of wake-ups: the table stream's dispatcher and the retry sweep.

`stream_handler` receives batches of the table's stream records (event
source mapping with `ReportBatchItemFailures`): it answers with the first
record of an address it could not handle, so Lambda retries from there;
`sweep_handler` runs on a schedule and delivers the retries that are due.
"""

from __future__ import annotations

from typing import Any

from cairn.entrypoints.container_init import container_init

with container_init():
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from cairn.dynamodb.stream_records import event_notices
    from cairn.services import Services
    from cairn.settings import get_settings
    from cairn.wakeups.sender import RUN_SECONDS

    logger = Logger(service="cairn")

    # Built at cold start and reused by every invocation of this container.
    services = Services.build(get_settings())


# Start no sender run (sweep, or dispatch left to the sweep) this long before Lambda's deadline, so the
# runs in flight can finish: a sender starts attempts for `RUN_SECONDS`, and its last one may take the
# whole delivery deadline.
_RUN_MARGIN_MS = int((RUN_SECONDS + services.settings.webhook_timeout_seconds + 10) * 1000)


@logger.inject_lambda_context
def stream_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    notices = event_notices(event.get("Records", []))
    failed = services.dispatcher.dispatch(
        notices, until=lambda: context.get_remaining_time_in_millis() < _RUN_MARGIN_MS
    )
    if failed:
        logger.warning("wake-up dispatch incomplete", extra={"failed": len(failed), "notices": len(notices)})
    # Records are retried from the earliest failure on; its sequence number says where.
    earliest = min(failed, key=lambda notice: int(notice.record_id or 0), default=None)
    return {"batchItemFailures": [] if earliest is None else [{"itemIdentifier": earliest.record_id}]}


@logger.inject_lambda_context
def sweep_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    handed = services.sweep.run(until=lambda: context.get_remaining_time_in_millis() < _RUN_MARGIN_MS)
    logger.info("wake-up retries swept", extra={"handed": handed})
    return {"handed": handed}
