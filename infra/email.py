"""Inbound email in AWS: SES stores each raw message in S3, then the ingest function reads it.

SES runs a rule's actions in order, so the message is in the bucket before the
function is invoked; the function gets only the SES notification (recipients,
verdicts, message id) and reads `<prefix><message id>` itself.
"""

from __future__ import annotations

import math
from typing import cast

from aws_cdk import ArnFormat, Aws, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ses as ses
from aws_cdk import aws_ses_actions as ses_actions
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.checks import acknowledge
from infra.config import StageConfig
from infra.failure_queue import failure_queue
from infra.function import FunctionBase, ServiceFunction

# The stack's one receipt rule; its ARN pins what SES may do here.
RECEIPT_RULE_NAME = "inbound"
# The id CDK's SES Lambda action gives its grant: one made first under it is kept.
_SES_INVOKE_PERMISSION = "AllowSes"

# Named by string: CDK never imports the application package.
EMAIL_HANDLER = "cairn.entrypoints.email_handler.lambda_handler"

# Where SES writes raw messages; the application reads `<prefix><SES message id>`.
MESSAGE_PREFIX = "inbound/"

# AwsCustomResource runs on one provider function per stack, at this fixed id.
_AWS_CUSTOM_RESOURCE_PROVIDER_ID = "AWS679f53fac002430cb0da5b7982bd2287"


class RawMessageBucket(Construct):
    """Private, encrypted bucket for raw messages, expiring them with their events.

    Attachments are never copied out of the message: once the event is gone
    its message has no reader left, so both live as long (the bucket rounds
    up to whole days).
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        retention_days = math.ceil(config.limits["event_retention_seconds"] / 86_400)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    prefix=MESSAGE_PREFIX,
                    expiration=Duration.days(retention_days),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=config.removal_policy,
            # A throw-away stage must be deletable although mail arrived.
            auto_delete_objects=config.ephemeral,
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "The only writer is SES (bucket policy pinned to this account) and the only "
            "readers are Cairn's own functions, by IAM; S3 data events in CloudTrail record "
            "object access for accounts that audit it, without a second bucket of access "
            "logs that would outlive the mail it describes.",
        )

    def grant_read_messages(self, function: lambda_.IFunction, *, delete: bool = False) -> None:
        """Let `function` read raw messages, and learn when one is gone; with `delete`, discard them.

        Without s3:ListBucket, S3 answers a missing key with 403 AccessDenied
        instead of 404 NoSuchKey, and an expired message would look like a
        permission failure instead of "attachment unavailable". Ingest
        discards mail for no address, and the API a deleted address's mail.
        """
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", *(["s3:DeleteObject"] if delete else [])],
                resources=[self.bucket.arn_for_objects(f"{MESSAGE_PREFIX}*")],
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": f"{MESSAGE_PREFIX}*"}},
            )
        )
        # A bucket's default child is its CfnBucket, and a function made here always has its role.
        bucket_id = Stack.of(self).get_logical_id(cast(s3.CfnBucket, self.bucket.node.default_child))
        acknowledge(
            cast(iam.IRole, function.role),
            f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{MESSAGE_PREFIX}*]",
            "Message keys are SES message ids, unknown until mail arrives; the wildcard is "
            "limited to the inbound prefix of this one bucket and to reading (and discarding) messages.",
        )

    @property
    def environment(self) -> dict[str, str]:
        """Where the application finds raw messages."""
        return {"CAIRN_EMAIL_BUCKET": self.bucket.bucket_name, "CAIRN_EMAIL_PREFIX": MESSAGE_PREFIX}


class FailedIngestQueue(Construct):
    """Where SES notifications land when ingest fails after Lambda's retries.

    Each record holds the SES event (with its message id) and the error, so an
    operator can fix the cause and re-ingest through the replay route while the
    raw message is still in the bucket.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.queue = failure_queue(
            self, "Queue", keeps="the SES notifications the ingest function failed on, with the error"
        )


class InboundEmail(Construct):
    """Receiving mail for the email domain: bucket, ingest function, SES receipt rules.

    The rule set is activated by the stack only when asked to: SES has one
    active rule set per account and region, and activating this one switches
    off whatever rule set (other stages, other domains) was active before.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, domain: str, config: StageConfig, base: FunctionBase
    ) -> None:
        super().__init__(scope, construct_id)
        self.messages = RawMessageBucket(self, "RawMessages", config=config)
        self.failures = FailedIngestQueue(self, "FailedIngest")
        self.ingest = ServiceFunction(
            self,
            "Ingest",
            base=base,
            handler=EMAIL_HANDLER,
            description="Cairn inbound email ingest",
            # A message up to SES's 40 MB limit is read and parsed in one go.
            timeout=Duration.seconds(60),
            memory_size=1024,
            environment=self.messages.environment,
            on_failure=destinations.SqsDestination(self.failures.queue),
        )
        self.messages.grant_read_messages(self.ingest.function, delete=True)
        self._admit_only_this_rule(config)

        self.rule_set = ses.ReceiptRuleSet(
            self,
            "RuleSet",
            receipt_rule_set_name=config.resource_name_prefix,
            rules=[
                ses.ReceiptRuleOptions(
                    receipt_rule_name=RECEIPT_RULE_NAME,
                    recipients=[domain],
                    # Spam and virus verdicts become part of every email event.
                    scan_enabled=True,
                    actions=[
                        ses_actions.S3(bucket=self.messages.bucket, object_key_prefix=MESSAGE_PREFIX),
                        ses_actions.Lambda(
                            function=self.ingest.function,
                            invocation_type=ses_actions.LambdaInvocationType.EVENT,
                        ),
                    ],
                )
            ],
        )
        if config.activate_receipt_rule_set:
            ActiveRuleSet(self, "Activate", rule_set=self.rule_set)

    def _admit_only_this_rule(self, config: StageConfig) -> None:
        """SES may write messages and invoke ingest for this stack's receipt rule only.

        CDK's SES actions grant SES by account alone, so any rule set in the
        account (another stage's, say) could drop mail into this bucket or
        call this function. The Lambda grant is made here first (the action
        then keeps it), and the bucket refuses SES writes from any other rule.
        """
        rule_arn = Stack.of(self).format_arn(
            service="ses",
            resource="receipt-rule-set",
            resource_name=f"{config.resource_name_prefix}:receipt-rule/{RECEIPT_RULE_NAME}",
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        ses_service = iam.ServicePrincipal("ses.amazonaws.com")
        self.ingest.function.add_permission(
            _SES_INVOKE_PERMISSION,
            principal=ses_service,
            action="lambda:InvokeFunction",
            source_account=Aws.ACCOUNT_ID,
            source_arn=rule_arn,
        )
        self.messages.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                principals=[ses_service],
                actions=["s3:PutObject"],
                resources=[self.messages.bucket.arn_for_objects("*")],
                conditions={"StringNotEquals": {"aws:SourceArn": rule_arn}},
            )
        )


class ActiveRuleSet(Construct):
    """Makes a receipt rule set the account's active one (CloudFormation has no resource for it).

    Nothing is undone on delete: deactivating would switch off receiving for
    the whole region even if another rule set became active in the meantime.
    The stack's rule set cannot be deleted while active, so tearing down a
    stage that activated it starts with `aws ses set-active-receipt-rule-set`.
    """

    def __init__(self, scope: Construct, construct_id: str, *, rule_set: ses.ReceiptRuleSet) -> None:
        super().__init__(scope, construct_id)
        name = rule_set.receipt_rule_set_name
        activation = cr.AwsCustomResource(
            self,
            "Call",
            on_update=cr.AwsSdkCall(
                service="SES",
                action="setActiveReceiptRuleSet",
                parameters={"RuleSetName": name},
                physical_resource_id=cr.PhysicalResourceId.of(name),
            ),
            policy=cr.AwsCustomResourcePolicy.from_sdk_calls(resources=cr.AwsCustomResourcePolicy.ANY_RESOURCE),
            install_latest_aws_sdk=False,
        )
        # After the rules exist, so activation never exposes an empty rule set.
        activation.node.add_dependency(rule_set)
        acknowledge(
            activation,
            "AwsSolutions-IAM5[Resource::*]",
            "ses:SetActiveReceiptRuleSet changes an account-wide setting and supports no "
            "resource-level permissions; the policy allows that one action and nothing else.",
        )
        acknowledge(
            Stack.of(self).node.find_child(_AWS_CUSTOM_RESOURCE_PROVIDER_ID),
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "The role of CDK's own AwsCustomResource provider, which the stack does not define; "
            "the managed policy only lets it write its CloudWatch logs.",
        )
