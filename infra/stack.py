"""The Cairn stack: storage and the HTTP API for one stage."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from infra.api import CairnApi
from infra.config import StageConfig
from infra.storage import CairnTable


class CairnStack(Stack):
    """One deployment of Cairn: the table and the API function that serves it."""

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
        api = CairnApi(self, "Api", table=storage.table, stage_name=config.stage)

        CfnOutput(
            self,
            "ApiUrl",
            description="Base URL of the Cairn API (clients append resource paths)",
            value=api.rest_api.url,
        )
