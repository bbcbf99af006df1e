"""Outbound email in AWS: SES v2 sends from the email domain, and their outcomes come back as events.

The domain's SES identity is the operator's (account-wide, shared with
receiving; see docs/deploy.md): the stack names it in IAM and owns the rest.

The API function sends with `ses:SendEmail`, allowed only on this domain's
identity and this stack's configuration set, and only from an address of
the domain (or only from the operator's sender, `outbound_from`, on its
identity). The configuration set publishes delivery, bounce, complaint,
rejection and rendering-failure events to an encrypted SNS topic whose one
subscriber, the outcome function, appends each as the send's outcome event.
SES may use the topic's key for this configuration set only. An outcome the
function fails to record after Lambda's retries (or that SNS cannot hand to
it) waits in an encrypted queue, which an alarm watches. An outcome SES
never reports is settled by a sweep on a schedule: past the send's
deadline, it records `email.outcome_unknown` in the slot the send reserved.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, Aws, Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_ses as ses
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import StageConfig
from infra.failure_queue import failure_queue
from infra.function import FunctionBase, ServiceFunction

# Named by string: CDK never imports the application package.
OUTCOME_HANDLER = "cairn.entrypoints.outbound_events_handler.lambda_handler"
OUTCOME_SWEEP_HANDLER = "cairn.entrypoints.outbound_events_handler.sweep_handler"
# Deadlines are days long: a few minutes late is nothing, and an idle sweep is one empty query.
OUTCOME_SWEEP_RATE = Duration.minutes(5)

# The SES events that end a send; Send, Open, Click and delays do not.
OUTCOME_EVENTS = (
    ses.EmailSendingEvent.DELIVERY,
    ses.EmailSendingEvent.BOUNCE,
    ses.EmailSendingEvent.COMPLAINT,
    ses.EmailSendingEvent.REJECT,
    ses.EmailSendingEvent.RENDERING_FAILURE,
)


class OutboundEmail(Construct):
    """Sending from the email domain: identity, configuration set, outcome topic and function, deadline sweep."""

    def __init__(
        self, scope: Construct, construct_id: str, *, domain: str, config: StageConfig, base: FunctionBase
    ) -> None:
        super().__init__(scope, construct_id)
        self._domain = domain
        self._sender = config.outbound_from
        self.configuration_set_name = f"{config.resource_name_prefix}-outbound"
        self.configuration_set = ses.ConfigurationSet(
            self, "ConfigurationSet", configuration_set_name=self.configuration_set_name
        )
        key = kms.Key(
            self,
            "TopicKey",
            description="Encrypts the outcomes SES publishes for Cairn's sends",
            enable_key_rotation=True,
            removal_policy=config.removal_policy,
        )
        # SES encrypts what it publishes to the topic with this key, for this configuration set only: without
        # the source ARN, any configuration set of the account could have SES use it.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("ses.amazonaws.com")],
                actions=["kms:GenerateDataKey*", "kms:Decrypt"],
                resources=["*"],
                conditions={
                    "StringEquals": {
                        "aws:SourceAccount": Aws.ACCOUNT_ID,
                        "aws:SourceArn": self.configuration_set_arn,
                    }
                },
            )
        )
        self.topic = sns.Topic(self, "Outcomes", master_key=key, enforce_ssl=True)
        self.configuration_set.add_event_destination(
            "Outcomes",
            destination=ses.EventDestination.sns_topic(self.topic),
            events=list(OUTCOME_EVENTS),
        )
        self.failures = failure_queue(
            self,
            "FailedOutcomes",
            keeps="the SES events the outcome function and its subscription could not make an outcome of",
        )
        self.recorder = ServiceFunction(
            self,
            "Recorder",
            base=base,
            handler=OUTCOME_HANDLER,
            description="Cairn outbound mail outcomes",
            timeout=Duration.seconds(30),
            memory_size=512,
            environment=self.environment,
            on_failure=destinations.SqsDestination(self.failures),
        )
        self.topic.add_subscription(
            subscriptions.LambdaSubscription(self.recorder.function, dead_letter_queue=self.failures)
        )
        # A function of its own, so each role holds only what its path needs; it never sends, so it is
        # not told how to.
        self.sweep = ServiceFunction(
            self,
            "OutcomeSweep",
            base=base,
            handler=OUTCOME_SWEEP_HANDLER,
            description="Cairn outbound mail outcome deadlines",
            timeout=Duration.minutes(2),
            memory_size=512,
        )
        events.Rule(
            self,
            "OutcomeSweepSchedule",
            description="Record email.outcome_unknown for sends whose outcome deadline passed unreported",
            schedule=events.Schedule.rate(OUTCOME_SWEEP_RATE),
            targets=[events_targets.LambdaFunction(self.sweep.function)],
        )

    @property
    def environment(self) -> dict[str, str]:
        """How the application sends: SES, through this configuration set."""
        return {"CAIRN_OUTBOUND": "ses", "CAIRN_SES_CONFIGURATION_SET": self.configuration_set_name}

    @property
    def configuration_set_arn(self) -> str:
        return Stack.of(self).format_arn(
            service="ses",
            resource="configuration-set",
            resource_name=self.configuration_set_name,
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )

    def grant_send(self, function: lambda_.Function) -> None:
        """Let `function` send: `ses:SendEmail` (API v2) through this set only, from its one sender.

        That is an address of the domain, or the operator's sender
        (`outbound_from`) when set: then every mail goes from it, and its
        identity (its domain's, or the address itself where SES verified only
        that) is the one named.
        """
        conditions: dict[str, Any]
        if self._sender is None:
            identities = [self._domain]
            conditions = {
                "StringLike": {"ses:FromAddress": f"addr_*@{self._domain}"},
                "StringEquals": {"ses:ApiVersion": "2"},
            }
        else:
            identities = [self._sender.rpartition("@")[2], self._sender]
            conditions = {"StringEquals": {"ses:FromAddress": self._sender, "ses:ApiVersion": "2"}}
        identity_arns = [
            Stack.of(self).format_arn(
                service="ses", resource="identity", resource_name=name, arn_format=ArnFormat.SLASH_RESOURCE_NAME
            )
            for name in identities
        ]
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["ses:SendEmail"],
                resources=[*identity_arns, self.configuration_set_arn],
                conditions=conditions,
            )
        )
        for name, value in self.environment.items():
            function.add_environment(name, value)
