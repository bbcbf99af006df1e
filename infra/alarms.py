"""CloudWatch alarms for what users would notice: server errors, throttling, lost mail.

Thresholds are fixed here rather than in context: each one is "this should
never happen" or a rate whose meaning does not change between stages. Alarms
notify an existing SNS topic when the `alarm_topic_arn` context names one.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.wakeups import Wakeups

PERIOD = Duration.minutes(5)

# Above this share of 5xx answers something is broken, not unlucky...
SERVER_ERROR_PERCENT = 5
# ...provided enough requests came in for a share to mean anything.
SERVER_ERROR_MIN_REQUESTS = 20

# A stream record older than this waited too long to wake its subscribers.
WAKE_ITERATOR_AGE_MS = 60_000

# Every DynamoDB operation the store issues; throttles and system errors are
# reported per operation and summed here.
TABLE_OPERATIONS = [
    dynamodb.Operation.GET_ITEM,
    dynamodb.Operation.BATCH_GET_ITEM,
    dynamodb.Operation.QUERY,
    dynamodb.Operation.PUT_ITEM,
    dynamodb.Operation.UPDATE_ITEM,
    dynamodb.Operation.DELETE_ITEM,
    dynamodb.Operation.BATCH_WRITE_ITEM,
    dynamodb.Operation.TRANSACT_WRITE_ITEMS,
    dynamodb.Operation.TRANSACT_GET_ITEMS,
]


class Alarms(Construct):
    """One alarm per failure a user would feel, all notifying the same topic."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name_prefix: str,
        stage: apigateway.Stage,
        functions: Mapping[str, lambda_.IFunction],
        table: dynamodb.ITableV2,
        failed_ingest: sqs.IQueue | None,
        topic_arn: str | None,
        wakeups: Wakeups | None = None,
        failed_outcomes: sqs.IQueue | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._name_prefix = name_prefix
        self._action = (
            cloudwatch_actions.SnsAction(sns.Topic.from_topic_arn(self, "Topic", topic_arn)) if topic_arn else None
        )
        self.alarms: list[cloudwatch.Alarm] = []
        # What each alarm watches, by its name without the prefix (`api-5xx-rate`, `api-errors`, ...).
        self.metrics: dict[str, cloudwatch.IMetric] = {}

        self._alarm(
            "api-5xx-rate",
            cloudwatch.MathExpression(
                expression=f"IF(requests >= {SERVER_ERROR_MIN_REQUESTS}, 100 * errors / requests, 0)",
                using_metrics={
                    "errors": stage.metric_server_error(period=PERIOD, statistic="Sum"),
                    "requests": stage.metric_count(period=PERIOD, statistic="Sum"),
                },
                period=PERIOD,
                label="5xx answers (% of requests)",
            ),
            threshold=SERVER_ERROR_PERCENT,
            description=f"At least {SERVER_ERROR_PERCENT}% of API answers were 5xx in 5 minutes.",
        )
        for name, function in functions.items():
            self._alarm(
                f"{name}-errors",
                function.metric_errors(period=PERIOD, statistic="Sum"),
                description=f"The {name} function failed (an unhandled exception, timeout or crash).",
            )
            self._alarm(
                f"{name}-throttles",
                function.metric_throttles(period=PERIOD, statistic="Sum"),
                description=f"Lambda refused to run the {name} function (concurrency exhausted).",
            )
        self._alarm(
            "table-throttles",
            table.metric_throttled_requests_for_operations(operations=TABLE_OPERATIONS, period=PERIOD),
            description="DynamoDB throttled requests to the Cairn table (a hot partition, the account's limit or "
            "the table's maximum throughput).",
        )
        self._alarm(
            "table-system-errors",
            table.metric_system_errors_for_operations(operations=TABLE_OPERATIONS, period=PERIOD),
            description="DynamoDB failed requests to the Cairn table on its side (HTTP 500).",
        )
        if failed_ingest is not None:
            self._alarm(
                "email-failed-ingest",
                failed_ingest.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                description="Inbound mail could not be ingested after retries; "
                "the failed-ingest queue holds its SES message ids for replay.",
            )
        if failed_outcomes is not None:
            self._alarm(
                "outbound-failed-outcomes",
                failed_outcomes.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                description="SES reported outcomes of sends that could not be recorded after retries; "
                "the failed-outcomes queue holds the SES events.",
            )
        if wakeups is not None:
            self._wakeup_alarms(wakeups)

    def _wakeup_alarms(self, wakeups: Wakeups) -> None:
        self._alarm(
            "wake-failed-batches",
            wakeups.failures.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
            description="Stream batches failed every retry: their events woke no subscriber; "
            "the queue holds their stream positions.",
        )
        self._alarm(
            "wake-iterator-age",
            wakeups.dispatcher.metric("IteratorAge", period=PERIOD, statistic="Maximum"),
            threshold=WAKE_ITERATOR_AGE_MS,
            description="The dispatcher lags the table's stream by over a minute: wake-ups are late.",
        )

    def _alarm(
        self,
        name: str,
        metric: cloudwatch.IMetric,
        *,
        description: str,
        threshold: float = 1,
    ) -> None:
        """Alarm when `metric` reaches `threshold` in one period; no data is no trouble."""
        alarm = cloudwatch.Alarm(
            self,
            name,
            alarm_name=f"{self._name_prefix}-{name}",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.metrics[name] = metric
        if self._action is not None:
            alarm.add_alarm_action(self._action)
            alarm.add_ok_action(self._action)
        self.alarms.append(alarm)
