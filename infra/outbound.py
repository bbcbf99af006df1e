"""Outbound email in AWS: SES v2 sends from the email domain, and their outcomes come back as events.

The domain's SES identity is the operator's (account-wide, shared with
receiving; see the README): the stack names it in IAM and owns the rest.

The API function sends with `ses:SendEmail`, allowed only on this domain's
identity and this stack's configuration set, and only from an address of
the domain. The configuration set publishes delivery, bounce, complaint,
rejection and rendering-failure events to an encrypted SNS topic whose one
subscriber, the outcome function, appends each as the send's outcome event.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import ArnFormat, Aws, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_ses as ses
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import StageConfig
from infra.function import ServiceFunction

# Named by string: CDK never imports the application package.
OUTCOME_HANDLER = "cairn.entrypoints.outbound_events_handler.lambda_handler"

# The SES events that end a send; Send, Open, Click and delays do not.
OUTCOME_EVENTS = (
    ses.EmailSendingEvent.DELIVERY,
    ses.EmailSendingEvent.BOUNCE,
    ses.EmailSendingEvent.COMPLAINT,
    ses.EmailSendingEvent.REJECT,
    ses.EmailSendingEvent.RENDERING_FAILURE,
)


class OutboundEmail(Construct):
    """Sending from the email domain: identity, configuration set, outcome topic and function."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        domain: str,
        config: StageConfig,
        code: lambda_.Code,
        environment: Mapping[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        self._domain = domain
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
        # SES encrypts what it publishes to the topic with this key.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("ses.amazonaws.com")],
                actions=["kms:GenerateDataKey*", "kms:Decrypt"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )
        self.topic = sns.Topic(self, "Outcomes", master_key=key, enforce_ssl=True)
        self.configuration_set.add_event_destination(
            "Outcomes",
            destination=ses.EventDestination.sns_topic(self.topic),
            events=list(OUTCOME_EVENTS),
        )
        self.recorder = ServiceFunction(
            self,
            "Recorder",
            code=code,
            handler=OUTCOME_HANDLER,
            description="Cairn outbound mail outcomes",
            timeout=Duration.seconds(30),
            memory_size=512,
            environment={**environment, **self.environment},
            log_retention=config.log_retention,
            removal_policy=config.removal_policy,
        )
        self.topic.add_subscription(subscriptions.LambdaSubscription(self.recorder.function))

    @property
    def environment(self) -> dict[str, str]:
        """How the application sends: SES, through this configuration set."""
        return {"CAIRN_OUTBOUND": "ses", "CAIRN_SES_CONFIGURATION_SET": self.configuration_set_name}

    def grant_send(self, function: lambda_.Function) -> None:
        """Let `function` send: `ses:SendEmail` (API v2) from an address of the domain, through this set only."""
        stack = Stack.of(self)
        identity_arn = stack.format_arn(
            service="ses", resource="identity", resource_name=self._domain, arn_format=ArnFormat.SLASH_RESOURCE_NAME
        )
        configuration_set_arn = stack.format_arn(
            service="ses",
            resource="configuration-set",
            resource_name=self.configuration_set_name,
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["ses:SendEmail"],
                resources=[identity_arn, configuration_set_arn],
                conditions={
                    "StringLike": {"ses:FromAddress": f"addr_*@{self._domain}"},
                    "StringEquals": {"ses:ApiVersion": "2"},
                },
            )
        )
        for name, value in self.environment.items():
            function.add_environment(name, value)
