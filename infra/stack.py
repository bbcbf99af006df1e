"""The Cairn stack: storage, the HTTP API, inbound email and alarms for one stage."""

from __future__ import annotations

from typing import Any

from aws_cdk import App, Aws, CfnOutput, Duration, Stack
from constructs import Construct

from infra.alarms import Alarms
from infra.api import API_HANDLER, CairnApi
from infra.checks import add_checks
from infra.code import function_code
from infra.config import StageConfig
from infra.email import InboundEmail
from infra.function import ServiceFunction
from infra.outbound import OutboundEmail
from infra.storage import CairnTable
from infra.streaming import StreamingFunction
from infra.wakeups import Wakeups


class CairnStack(Stack):
    """One deployment of Cairn.

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
        storage = CairnTable(self, "Storage", config=config)
        table = storage.table
        code = function_code()
        environment = {"CAIRN_TABLE_NAME": table.table_name, **config.application_environment}

        api_service = ServiceFunction(
            self,
            "ApiFunction",
            code=code,
            handler=API_HANDLER,
            description="Cairn HTTP API",
            # The feed's long-polls run in the streaming function, but MCP's poll tool may
            # wait up to 25 s here too, and API Gateway gives up at 29 s: the function
            # must outlive both so API Gateway, not Lambda, cuts.
            timeout=Duration.seconds(30),
            memory_size=1024,
            environment=environment,
            log_retention=config.log_retention,
            removal_policy=config.removal_policy,
            reserved_concurrency=config.api_reserved_concurrency,
            # New containers start from a snapshot taken after import (`cairn.entrypoints.snapstart`).
            snap_start=True,
        )
        api_function = api_service.function
        storage.grant_store_access(api_function)
        streaming = StreamingFunction(
            self, "StreamingFunction", code=code, environment=environment, config=config
        ).function
        storage.grant_store_access(streaming)
        functions = {"api": api_function, "streaming": streaming}

        wakeups = Wakeups(self, "Wakeups", storage=storage, config=config, code=code, environment=environment)
        # The API sends test deliveries (`POST .../subscriptions/{id}/test`).
        wakeups.grant_targets(api_function)
        functions.update(wakeups.functions)

        email = None
        if config.email_domain is not None:
            email = InboundEmail(
                self,
                "Email",
                domain=config.email_domain,
                config=config,
                code=code,
                environment=environment,
            )
            storage.grant_store_access(email.ingest.function)
            # Attachment downloads and replays re-read the stored message; deleting an address discards its mail.
            for reader in (api_function, streaming):
                email.messages.grant_read_messages(reader, delete=reader is api_function)
                for name, value in email.messages.environment.items():
                    reader.add_environment(name, value)
            functions["email-ingest"] = email.ingest.function
            outbound = OutboundEmail(
                self,
                "Outbound",
                domain=config.email_domain,
                config=config,
                code=code,
                environment=environment,
            )
            outbound.grant_send(api_function)
            storage.grant_store_access(outbound.recorder.function)
            functions["outbound-outcomes"] = outbound.recorder.function
        api = CairnApi(
            self, "Api", handler=api_service.entry, config=config, streaming=streaming, downloads=email is not None
        )

        Alarms(
            self,
            "Alarms",
            name_prefix=config.stack_name,
            stage=api.stage,
            functions=functions,
            table=table,
            failed_ingest=email.failures.queue if email else None,
            wakeups=wakeups,
            topic_arn=config.alarm_topic_arn,
        )
        self._outputs(config, api, table_name=table.table_name, email=email)

    def _outputs(
        self, config: StageConfig, api: CairnApi, *, table_name: str, email: InboundEmail | None
    ) -> None:
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
