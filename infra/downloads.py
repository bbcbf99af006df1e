"""The function behind attachment downloads: the API's own code, answering through response streaming.

Lambda's managed Python runtime answers buffered only, and a buffered answer
stops at 6 MB: about 4.4 MB of attachment once base64-encoded. Attachments go
up to 10 MB, so this function runs the same resolver as the API function
under Cairn's streaming loop (`cairn.entrypoints.streaming`), which Lambda
starts through the exec wrapper in place of its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import StageConfig
from infra.function import ServiceFunction

# What the wrapper runs; named as the handler so the function says what it runs.
DOWNLOAD_HANDLER = "cairn.entrypoints.streaming.main"
# Lambda unpacks the code asset at /var/task.
EXEC_WRAPPER = "/var/task/cairn/entrypoints/stream_bootstrap"


class DownloadFunction(Construct):
    """Streams attachment bytes, re-read from the stored message on each request."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        environment: Mapping[str, str],
        config: StageConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = ServiceFunction(
            self,
            "Function",
            code=code,
            handler=DOWNLOAD_HANDLER,
            description="Cairn attachment downloads (response streaming)",
            # Streamed answers may outlast API Gateway's 29 s; reading and
            # parsing a 40 MB message, then sending 10 MB, takes a few seconds.
            timeout=Duration.seconds(60),
            memory_size=1024,
            environment={**environment, "AWS_LAMBDA_EXEC_WRAPPER": EXEC_WRAPPER},
            log_retention=config.log_retention,
            removal_policy=config.removal_policy,
        ).function
