"""CairnService: one whole Cairn deployment as a construct, to place in any stack.

Cairn's own stack (`infra.stack`) is one user of it; a team with its own CDK
app is another (`from cairn.cdk import CairnService`). Everything the service
names physically (alarms, the REST API, the SES rule set and configuration
set) starts with `name_prefix`, derived from the construct's path unless
given, so two services live side by side in one stack, account and region.
"""

from __future__ import annotations

from dataclasses import replace

from aws_cdk import Duration, Names, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.alarms import Alarms
from infra.api import API_HANDLER, WORKER_RESOURCES, WORKER_ROOT, CairnApi
from infra.budget import CostBudget
from infra.checks import acknowledge, finding_text
from infra.code import function_code
from infra.config import StageConfig
from infra.email import InboundEmail
from infra.function import FunctionBase, ServiceFunction
from infra.outbound import OutboundEmail
from infra.server_secret import ServerSecret
from infra.storage import CairnTable
from infra.streaming import StreamingFunction
from infra.wakeups import (
    DURABLE_CALLBACK_ACTION,
    TARGET_ACTIONS,
    Wakeups,
    acknowledge_wildcard_grant,
    durable_executions,
)

# The construct's props are the stage configuration: one definition, one validation.
CairnProps = StageConfig

WakeTarget = sqs.IQueue | events.IEventBus | sfn.IStateMachine | lambda_.IFunction

_WAKE_TARGETS_VARIABLE = "CAIRN_WAKE_TARGET_ARNS"


class CairnService(Construct):
    """The table, the API and streaming functions behind API Gateway, wake-ups, alarms, and with
    an email domain, inbound and outbound mail.

    `props` are validated when they are made (`CairnProps(stage=...)` raises
    `ValueError` with the same messages `cdk synth -c ...` gives); without
    them, every prop takes its default. The service adds no stack outputs and
    no cdk-nag checks: the consuming app decides both.
    """

    def __init__(self, scope: Construct, construct_id: str, *, props: StageConfig | None = None) -> None:
        super().__init__(scope, construct_id)
        props = props or StageConfig()
        config = (
            props
            if props.name_prefix is not None
            else replace(props, name_prefix=Names.unique_resource_name(self, max_length=55, separator="-"))
        )
        self.config = config
        storage = CairnTable(self, "Storage", config=config)
        self.table: dynamodb.ITableV2 = storage.table
        # Shared with CairnAddress's handler: one asset per service.
        self.code = code = function_code()
        base = FunctionBase(
            code,
            {"CAIRN_TABLE_NAME": storage.table.table_name, **config.application_environment},
            config.log_retention,
            config.removal_policy,
        )

        api_service = ServiceFunction(
            self,
            "ApiFunction",
            base=base,
            handler=API_HANDLER,
            description="Cairn HTTP API",
            # No read waits here (long-polls, event streams and `/mcp`, whose poll may wait, run in
            # the streaming function), but API Gateway gives up at 29 s: the function outlives that
            # so API Gateway, not Lambda, cuts a slow request.
            timeout=Duration.seconds(30),
            memory_size=1024,
            reserved_concurrency=config.api_reserved_concurrency,
            # New containers start from a snapshot taken after import (`cairn.entrypoints.snapstart`).
            snap_start=True,
        )
        api_function = api_service.function
        storage.grant_store_access(api_function, function="api")
        # Provisioning under a key and inbox verifiers need it, and the functions that sign webhook deliveries.
        self.server_secret = ServerSecret(self, "ServerSecret", config=config)
        self.server_secret.grant_read(api_function)
        streaming = StreamingFunction(self, "StreamingFunction", base=base, config=config).function
        storage.grant_store_access(streaming, function="streaming")
        functions = {"api": api_function, "streaming": streaming}

        self.wakeups = Wakeups(self, "Wakeups", storage=storage, config=config, base=base)
        # The API sends test deliveries (`POST .../subscriptions/{id}/test`).
        self.wakeups.grant_targets(api_function)
        functions.update(self.wakeups.functions)
        # Who delivers wake-ups: every grant_wake_target reaches exactly these.
        self._wake_senders = [api_function, self.wakeups.dispatcher, self.wakeups.sweep]
        # Webhook secrets are stored sealed (`cairn.wakeups.webhook_secrets`): a sender opens them to sign.
        self.server_secret.grant_read(self.wakeups.dispatcher)
        self.server_secret.grant_read(self.wakeups.sweep)
        self._granted_targets: list[str] = []

        self.email: InboundEmail | None = None
        self.outbound: OutboundEmail | None = None
        if config.email_domain is not None:
            self.email = email = InboundEmail(self, "Email", domain=config.email_domain, config=config, base=base)
            storage.grant_store_access(email.ingest.function, function="email-ingest")
            # Attachment downloads and replays re-read the stored message; deleting an address discards its mail.
            for reader in (api_function, streaming):
                email.messages.grant_read_messages(reader, delete=reader is api_function)
                for name, value in email.messages.environment.items():
                    reader.add_environment(name, value)
            functions["email-ingest"] = email.ingest.function
            self.outbound = outbound = OutboundEmail(
                self, "Outbound", domain=config.email_domain, config=config, base=base
            )
            # The REST send and contact routes, and `/mcp`'s send_email and add_contact (streaming function).
            for sender in (api_function, streaming):
                outbound.grant_send(sender)
            storage.grant_store_access(outbound.recorder.function, function="outbound-outcomes")
            functions["outbound-outcomes"] = outbound.recorder.function
            storage.grant_store_access(outbound.sweep.function, function="outbound-sweep")
            functions["outbound-sweep"] = outbound.sweep.function
        self._functions = list(functions.values())
        self.api = CairnApi(
            self, "Api", handler=api_service.entry, config=config, streaming=streaming, downloads=self.email is not None
        )
        self.alarms = Alarms(
            self,
            "Alarms",
            name_prefix=config.resource_name_prefix,
            stage=self.api.stage,
            functions=functions,
            table=storage.table,
            failed_ingest=self.email.failures.queue if self.email else None,
            wakeups=self.wakeups,
            topic_arn=config.alarm_topic_arn,
            failed_outcomes=self.outbound.failures if self.outbound else None,
        )
        self.budget = (
            CostBudget(
                self,
                "Budget",
                name=config.resource_name_prefix,
                monthly_usd=config.monthly_budget_usd,
                emails=config.budget_emails,
                topic_arn=config.alarm_topic_arn,
            )
            if config.monthly_budget_usd is not None
            else None
        )

    @property
    def api_url(self) -> str:
        """The base URL clients use: the custom domain when there is one."""
        return self.api.url

    @property
    def runtime_invoke_arn(self) -> str:
        """What an IAM policy names to let a principal call the runtime routes."""
        return self.api.runtime_invoke_arn

    def grant_runtime_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` call the runtime and memory routes (SigV4): execute-api:Invoke on them, nothing else."""
        stage = self.api.stage.stage_name
        routes = [f"/{'/'.join((*WORKER_ROOT, name))}" for name in WORKER_RESOURCES]
        arns = [
            self.api.rest_api.arn_for_execute_api(method="*", path=path, stage=stage)
            for route in routes
            for path in (route, f"{route}/*")
        ]
        # The statement lands in the principal's policy (a role's), which may live outside `grantee`.
        principal = grantee.grant_principal
        if isinstance(principal, Construct):
            for arn in arns:
                acknowledge(
                    principal,
                    f"AwsSolutions-IAM5[Resource::{finding_text(Stack.of(self).resolve(arn))}]",
                    "Cairn's runtime and memory routes: any method on them and any path below them, on this "
                    "service's API and stage only; the routes are the grant, the wildcards are the routes' own shape.",
                )
        return iam.Grant.add_to_principal(grantee=grantee, actions=["execute-api:Invoke"], resource_arns=arns)

    def grant_wake_target(self, target: WakeTarget, *, durable_callbacks: bool = False) -> None:
        """Allow wake-up subscriptions to deliver to `target`, and its senders to reach it with its one action.

        The target's ARN joins the application's allow-list (`wake_target_arns`);
        the API function (test deliveries), the dispatcher and the sweep get
        exactly the action that kind of target needs, on exactly that ARN.
        With `durable_callbacks`, `target` is a durable function (the function
        itself, not a version or alias): what joins the list is its durable
        executions, whose callbacks `lambda_durable_callback` subscriptions
        complete (`lambda:SendDurableExecutionCallbackSuccess`); the function
        is not invoked.
        """
        service, arn = _target_arn(target)
        action = TARGET_ACTIONS[service]
        if durable_callbacks:
            if service != "lambda":
                raise TypeError("durable_callbacks needs a Lambda function")
            arn, action = durable_executions(arn), DURABLE_CALLBACK_ACTION
            self._acknowledge_durable_executions(arn)
        self._granted_targets.append(arn)
        # The whole list each time: a later grant replaces the value an earlier one set.
        allow_list = Stack.of(self).to_json_string(self.wake_target_arns())
        for function in self._functions:
            function.add_environment(_WAKE_TARGETS_VARIABLE, allow_list)
        for sender in self._wake_senders:
            sender.add_to_role_policy(iam.PolicyStatement(actions=[action], resources=[arn]))

    def _acknowledge_durable_executions(self, pattern: str) -> None:
        resource = finding_text(Stack.of(self).resolve(pattern))
        for sender in self._wake_senders:
            acknowledge_wildcard_grant(
                sender,
                resource,
                "Durable executions are created at run time: the wildcards stand for one granted function's "
                "versions and executions, and the action only completes their callbacks.",
            )

    def wake_target_arns(self) -> list[str]:
        """The allow-list: the props' patterns, then every target granted."""
        return [*self.config.wake_target_arns, *self._granted_targets]

    def metric(self, alarm: str) -> cloudwatch.IMetric:
        """What the alarm named `alarm` (without the name prefix, e.g. `api-5xx-rate`) watches."""
        return self.alarms.metrics[alarm]

    def metric_api_server_error_rate(self) -> cloudwatch.IMetric:
        """5xx answers as a percentage of requests, per 5 minutes (0 below 20 requests)."""
        return self.metric("api-5xx-rate")

    def metric_function_errors(self, function: str) -> cloudwatch.IMetric:
        """Failed invocations of `function` (`api`, `streaming`, `wake-dispatcher`, `wake-sweep`, `email-ingest`,
        `outbound-outcomes`, `outbound-sweep`)."""
        return self.metric(f"{function}-errors")

    def metric_function_throttles(self, function: str) -> cloudwatch.IMetric:
        """Invocations of `function` Lambda refused for lack of concurrency."""
        return self.metric(f"{function}-throttles")

    def metric_table_throttles(self) -> cloudwatch.IMetric:
        """DynamoDB requests to the table that were throttled."""
        return self.metric("table-throttles")

    def metric_table_system_errors(self) -> cloudwatch.IMetric:
        """DynamoDB requests to the table that failed on DynamoDB's side."""
        return self.metric("table-system-errors")

    def metric_wake_failed_batches(self) -> cloudwatch.IMetric:
        """Stream batches that failed every retry (their positions wait in a queue)."""
        return self.metric("wake-failed-batches")

    def metric_wake_iterator_age(self) -> cloudwatch.IMetric:
        """How far the wake-up dispatcher lags the table's stream, in milliseconds."""
        return self.metric("wake-iterator-age")

    def metric_email_failed_ingest(self) -> cloudwatch.IMetric:
        """Inbound messages whose ingest failed after retries; only with an email domain."""
        return self.metric("email-failed-ingest")

    def metric_outbound_failed_outcomes(self) -> cloudwatch.IMetric:
        """Outcomes of sends SES reported that could not be recorded after retries; only with an email domain."""
        return self.metric("outbound-failed-outcomes")


def _target_arn(target: WakeTarget) -> tuple[str, str]:
    """The kind of target (its ARN's service) and its ARN.

    jsii interfaces are protocols `isinstance` cannot check: each kind is told by its ARN attribute.
    """
    for service, attribute in _TARGET_ARN_ATTRIBUTES.items():
        arn = getattr(target, attribute, None)
        if isinstance(arn, str):
            return service, arn
    raise TypeError(f"a wake-up target is a queue, event bus, state machine or function, not {type(target).__name__}")


# The attribute holding each kind of target's ARN, by the service in that ARN.
_TARGET_ARN_ATTRIBUTES = {
    "sqs": "queue_arn",
    "events": "event_bus_arn",
    "states": "state_machine_arn",
    "lambda": "function_arn",
}
