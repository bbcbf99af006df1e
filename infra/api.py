"""The HTTP front door: one Lambda function behind an API Gateway REST API."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

# Everything Lambda runs lives under functions/; resolved from this file so
# synthesis does not depend on the working directory.
FUNCTIONS_DIR = Path(__file__).resolve().parent.parent / "functions"

# Named by string: CDK never imports the application package.
API_HANDLER = "cairn.api.handler.lambda_handler"

# Interpreter caches and packaging metadata are not code; shipping them only
# changes the asset hash and forces needless deployments.
ASSET_EXCLUDES = ["__pycache__", "*.pyc", ".pytest_cache", "*.egg-info"]


class CairnApi(Construct):
    """The API function with read/write access to the table, served by API Gateway.

    API Gateway proxies every path and method to the one function; routing
    happens in the application, so the routes Lambda runs are the routes the
    local server runs.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITableV2,
        stage_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = lambda_.Function(
            self,
            "Function",
            description="Cairn HTTP API",
            runtime=lambda_.Runtime.PYTHON_3_12,
            architecture=lambda_.Architecture.ARM_64,
            # Only the cairn package itself for now: its third-party dependencies
            # (Powertools, pydantic, ...) are bundled into the asset in a later
            # change, without Docker, so synthesis stays offline.
            code=lambda_.Code.from_asset(str(FUNCTIONS_DIR), exclude=ASSET_EXCLUDES),
            handler=API_HANDLER,
            memory_size=1024,
            # Long-poll waits at most 25 s and API Gateway gives up at 29 s;
            # the function must outlive both so API Gateway, not Lambda, cuts.
            timeout=Duration.seconds(30),
            environment={
                "CAIRN_TABLE_NAME": table.table_name,
                "POWERTOOLS_SERVICE_NAME": "cairn",
                "POWERTOOLS_METRICS_NAMESPACE": "Cairn",
                "POWERTOOLS_LOG_LEVEL": "INFO",
            },
        )
        table.grant_read_write_data(self.function)

        self.rest_api = apigateway.LambdaRestApi(
            self,
            "RestApi",
            rest_api_name=f"cairn-{stage_name}",
            description="Cairn HTTP API",
            handler=self.function,
            proxy=True,
            deploy_options=apigateway.StageOptions(stage_name=stage_name),
            # The CloudWatch role is one per account and region; a stack that
            # owns it would fight every other stage over it.
            cloud_watch_role=False,
        )
