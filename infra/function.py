"""One Lambda function running Cairn code, with its own log group and a role that can do nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.checks import acknowledge
from infra.code import ARCHITECTURE, RUNTIME

# Powertools reads these; every function logs and publishes metrics the same way.
POWERTOOLS_ENVIRONMENT = {
    "POWERTOOLS_SERVICE_NAME": "cairn",
    "POWERTOOLS_METRICS_NAMESPACE": "Cairn",
    "POWERTOOLS_LOG_LEVEL": "INFO",
    # Requests and responses carry read tokens and inbox secrets: never copy
    # them into logs or traces.
    "POWERTOOLS_LOGGER_LOG_EVENT": "false",
    "POWERTOOLS_TRACER_CAPTURE_RESPONSE": "false",
}


@dataclass(frozen=True)
class FunctionBase:
    """What the functions of one service share: the code asset, the environment each starts with, and how long
    their logs are kept and what becomes of them when the stack goes."""

    code: lambda_.Code
    environment: Mapping[str, str]
    log_retention: logs.RetentionDays
    removal_policy: RemovalPolicy


class ServiceFunction(Construct):
    """A Cairn function: shared code asset, arm64, active tracing, logs kept for the stage's retention.

    The role starts empty (no AWS managed policy): it may write its own log
    group and X-Ray segments, and callers grant whatever else the function
    needs on the exact resources.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        base: FunctionBase,
        handler: str,
        description: str,
        timeout: Duration,
        memory_size: int,
        environment: Mapping[str, str] | None = None,
        on_failure: lambda_.IDestination | None = None,
        reserved_concurrency: int | None = None,
        snap_start: bool = False,
    ) -> None:
        """`environment` is added to the base's; `snap_start`: publish versions with SnapStart and serve them
        through `live` (see `entry`)."""
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(self, "Logs", retention=base.log_retention, removal_policy=base.removal_policy)
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{description}: runtime permissions",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            code=base.code,
            handler=handler,
            role=role,
            timeout=timeout,
            memory_size=memory_size,
            environment={**POWERTOOLS_ENVIRONMENT, **base.environment, **(environment or {})},
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
            on_failure=on_failure,
            reserved_concurrent_executions=reserved_concurrency,
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if snap_start else None,
        )
        # SnapStart starts containers from a snapshot of a published version only, never of
        # $LATEST: callers must invoke the version, through an alias that follows each deployment.
        self.entry: lambda_.IFunction = (
            lambda_.Alias(self, "Live", alias_name="live", version=self.function.current_version)
            if snap_start
            else self.function
        )
        self.log_group.grant_write(role)
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "xray:PutTraceSegments and xray:PutTelemetryRecords (added for active tracing) "
            "support no resource-level permissions; '*' is the only resource they accept. "
            "Every other statement names its exact resource.",
        )
