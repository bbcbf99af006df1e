"""Wake-ups in AWS: the table's stream feeds the dispatcher; a schedule sweeps due retries.

Both functions run the same code `cairn serve` runs in-process
(`cairn.wakeups`). They, and the API function (whose `POST .../test` sends
a delivery), may call exactly the AWS targets the `wake_target_arns`
context names, and nothing wider.
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from constructs import Construct

from infra.checks import acknowledge
from infra.config import StageConfig
from infra.failure_queue import failure_queue
from infra.function import FunctionBase, ServiceFunction
from infra.storage import CairnTable

DISPATCH_HANDLER = "cairn.entrypoints.wake_handler.stream_handler"
SWEEP_HANDLER = "cairn.entrypoints.wake_handler.sweep_handler"

# The one action each kind of target needs, by the service in its ARN.
TARGET_ACTIONS = {
    "sqs": "sqs:SendMessage",
    "events": "events:PutEvents",
    "lambda": "lambda:InvokeFunction",
    "states": "states:SendTaskSuccess",
}
# A Lambda pattern naming durable executions (`<function ARN>:<version>/durable-execution/<name>/<id>`)
# is there for their callbacks: Cairn completes them and never invokes the function.
DURABLE_EXECUTIONS = "/durable-execution/"
DURABLE_CALLBACK_ACTION = "lambda:SendDurableExecutionCallbackSuccess"


def target_action(pattern: str) -> str:
    """The one action a delivery to what the ARN pattern names needs."""
    service = pattern.split(":")[2]
    if service == "lambda" and DURABLE_EXECUTIONS in pattern:
        return DURABLE_CALLBACK_ACTION
    return TARGET_ACTIONS[service]


def durable_executions(function_arn: str) -> str:
    """The pattern of every durable execution of a function (any version), from its unqualified ARN."""
    return f"{function_arn}:*{DURABLE_EXECUTIONS}*"


# A batch waits behind slow targets (10 s each, in parallel per subscription); give it room.
DISPATCH_TIMEOUT = Duration.minutes(5)
SWEEP_RATE = Duration.minutes(1)
# Stream records are kept 24 h; after this many failed tries a batch goes to the failure queue.
STREAM_RETRY_ATTEMPTS = 10
# Lambda's most concurrent batches per stream shard.
STREAM_PARALLELIZATION = 10


class Wakeups(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, storage: CairnTable, config: StageConfig, base: FunctionBase
    ) -> None:
        super().__init__(scope, construct_id)
        self._patterns = config.wake_target_arns
        self.failures = failure_queue(
            self, "FailedBatches", keeps="the positions of the stream's batches that failed every retry"
        )
        self.dispatcher = ServiceFunction(
            self,
            "Dispatcher",
            base=base,
            handler=DISPATCH_HANDLER,
            description="Cairn wake-up dispatcher (table stream)",
            timeout=DISPATCH_TIMEOUT,
            memory_size=512,
        ).function
        self.dispatcher.add_event_source(
            event_sources.DynamoEventSource(
                storage.table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=100,
                # Up to this many batches of one shard at once (each address's records stay in order), so a
                # batch held by a slow target, up to its delivery deadline, holds up few other addresses.
                parallelization_factor=STREAM_PARALLELIZATION,
                bisect_batch_on_error=True,
                report_batch_item_failures=True,
                retry_attempts=STREAM_RETRY_ATTEMPTS,
                max_record_age=Duration.days(1),
                on_failure=event_sources.SqsDlq(self.failures),
                # Only address events wake anyone: heads, state keys and claims never reach the function,
                # nor events written while their address had no subscription (marked by the append). The
                # marker's test is on its leaf (`BOOL`): Lambda's `exists` only works on leaves.
                filters=[
                    lambda_.FilterCriteria.filter(
                        {
                            "eventName": lambda_.FilterRule.is_equal("INSERT"),
                            "dynamodb": {
                                "Keys": {"sk": {"S": lambda_.FilterRule.begins_with("E#")}},
                                "NewImage": {"unsubscribed": {"BOOL": lambda_.FilterRule.not_exists()}},
                            },
                        }
                    )
                ],
            )
        )
        self.sweep = ServiceFunction(
            self,
            "Sweep",
            base=base,
            handler=SWEEP_HANDLER,
            description="Cairn wake-up retry sweep",
            timeout=DISPATCH_TIMEOUT,
            memory_size=512,
        ).function
        events.Rule(
            self,
            "SweepSchedule",
            description="Deliver the wake-up retries that are due",
            schedule=events.Schedule.rate(SWEEP_RATE),
            targets=[events_targets.LambdaFunction(self.sweep)],
        )
        for name, function in self.functions.items():
            storage.grant_store_access(function, function=name)
            self.grant_targets(function)

    @property
    def functions(self) -> dict[str, lambda_.Function]:
        return {"wake-dispatcher": self.dispatcher, "wake-sweep": self.sweep}

    def grant_targets(self, function: lambda_.Function) -> None:
        """Let `function` deliver to the allow-listed targets, each with its one action."""
        by_action: dict[str, list[str]] = {}
        for pattern in self._patterns:
            by_action.setdefault(target_action(pattern), []).append(pattern)
        for action, resources in sorted(by_action.items()):
            function.add_to_role_policy(iam.PolicyStatement(actions=[action], resources=resources))
        _acknowledge_wildcards(function, self._patterns)


def _acknowledge_wildcards(function: lambda_.Function, patterns: Iterable[str]) -> None:
    for pattern in patterns:
        if "*" in pattern:
            acknowledge_wildcard_grant(
                function,
                pattern,
                "The operator's wake_target_arns allow-list names this pattern; subscriptions are "
                "refused unless their target matches it, and the grant is exactly the pattern.",
            )


def acknowledge_wildcard_grant(function: lambda_.Function, resource: str, reason: str) -> None:
    """Accept cdk-nag's finding on a wildcard `resource` (as the finding writes it) in `function`'s role."""
    # The grant sits in the role's policy, a sibling of the function in its ServiceFunction.
    owner = function.node.scope
    assert owner is not None
    acknowledge(owner, f"AwsSolutions-IAM5[Resource::{resource}]", reason)
