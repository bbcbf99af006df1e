"""The Cairn stack: storage, the HTTP API, inbound email and alarms for one stage."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from aws_cdk import App, Aws, CfnOutput, Stack
from constructs import Construct

from infra.api import CairnApi
from infra.checks import add_checks
from infra.config import StageConfig
from infra.email import InboundEmail
from infra.service import CairnService


class CairnStack(Stack):
    """One deployment of Cairn: a CairnService configured from context, and the outputs an operator needs.

    Always: the table, the API function behind API Gateway, the streaming
    function behind the feed's reads, alarms. With an email domain: the
    raw-message bucket, the ingest function and the SES receipt rules that
    feed it, attachment downloads from the streaming function, and outbound
    mail (SES identity, configuration set, outcome topic and function).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # "Default" leaves the service out of every logical id, so resources keep the ids they had
        # when the stack defined them itself (a new id would replace the table); names stay `cairn-<stage>`.
        self.service = CairnService(
            self, "Default", props=replace(config, name_prefix=config.name_prefix or config.stack_name)
        )
        api = self.service.api
        self._outputs(config, api, table_name=self.service.table.table_name, email=self.service.email)

    def _outputs(self, config: StageConfig, api: CairnApi, *, table_name: str, email: InboundEmail | None) -> None:
        """What an operator needs after `cdk deploy`: URLs, names, and the DNS records to publish."""
        outputs = {
            "ApiUrl": ("Base URL of the Cairn API", api.url),
            "RuntimeInvokeArn": (
                "Resource for execute-api:Invoke in the IAM policy of runtime-store callers",
                api.runtime_invoke_arn,
            ),
            "TableName": ("The DynamoDB table", table_name),
        }
        if api.rest_api.domain_name is not None:
            outputs["ApiDomainTarget"] = (
                f"DNS: CNAME (or alias) {config.api_domain_name} to this name",
                api.rest_api.domain_name.domain_name_alias_domain_name,
            )
        if email is not None:
            outputs |= {
                "EmailMxRecord": (
                    f"DNS: MX record for {config.email_domain}",
                    f"10 inbound-smtp.{Aws.REGION}.amazonaws.com",
                ),
                "ReceiptRuleSetName": (
                    "SES receipt rule set (receives mail only while it is the active one)",
                    email.rule_set.receipt_rule_set_name,
                ),
                "EmailBucketName": ("Raw inbound messages", email.messages.bucket.bucket_name),
                "FailedIngestQueueUrl": (
                    "SES events whose ingest failed after retries (replay them)",
                    email.failures.queue.queue_url,
                ),
            }
        for name, (description, value) in outputs.items():
            CfnOutput(self, name, description=description, value=value)


def build(app: App) -> CairnStack:
    """The stack for the stage the app's context describes, checked by cdk-nag.

    app.py and the tests both build through here, so the tests check exactly
    what `cdk deploy` would deploy.
    """
    config = StageConfig.from_context(app.node)
    stack = CairnStack(app, config.stack_name, config=config)
    add_checks(app)
    return stack
