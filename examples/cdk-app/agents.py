#!/usr/bin/env python3
"""A team's own CDK app with Cairn in it: a service, an address declared as a resource, an agent that
reads the address's credentials and calls the runtime routes, and a state machine the wake-ups may start.

`python examples/cdk-app/agents.py` synthesizes it (cdk-nag included) into cdk.out/examples/cdk-app.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from cairn.cdk import CairnAddress, CairnProps, CairnService
from infra.checks import acknowledge, add_checks

AGENT_CODE = '''
import os


def handler(event, context):
    # A real agent reads its address from the secret (CAIRN_ADDRESS_SECRET) and calls CAIRN_URL.
    return {"address_secret": os.environ["CAIRN_ADDRESS_SECRET"], "cairn_url": os.environ["CAIRN_URL"]}
'''


class AgentsStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        cairn = CairnService(self, "Cairn", props=CairnProps(stage="agents", ephemeral=True))
        callbacks = CairnAddress(
            self,
            "BuildCallbacks",
            service=cairn,
            task_id="nightly-build",
            expires_in=cdk.Duration.days(30),
            state={"config": {"branch": "main"}},
        )

        role = iam.Role(self, "AgentRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        log_group = logs.LogGroup(self, "AgentLogs", retention=logs.RetentionDays.ONE_MONTH)
        log_group.grant_write(role)
        agent = lambda_.Function(
            self,
            "Agent",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.handler",
            code=lambda_.Code.from_inline(AGENT_CODE),
            role=role,
            log_group=log_group,
            environment={"CAIRN_ADDRESS_SECRET": callbacks.secret_arn, "CAIRN_URL": cairn.api_url},
        )
        callbacks.grant_read(agent)
        cairn.grant_runtime_invoke(agent)

        # Started by a wake-up subscription on the address (`{"target": {"type": "states", ...}}`).
        flow = sfn.StateMachine(
            self,
            "BuildFlow",
            definition_body=sfn.DefinitionBody.from_chainable(sfn.Pass(self, "BuildDone")),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=logs.LogGroup(self, "BuildFlowLogs", retention=logs.RetentionDays.ONE_MONTH),
                level=sfn.LogLevel.ALL,
            ),
        )
        cairn.grant_wake_target(flow)
        acknowledge(
            flow,
            "AwsSolutions-IAM5[Resource::*]",
            "Step Functions' log delivery calls (logs:CreateLogDelivery and the rest) and X-Ray's support no "
            "resource-level permissions; CDK adds them for the state machine's own logging and tracing.",
        )
        cdk.CfnOutput(self, "CairnUrl", value=cairn.api_url)
        cdk.CfnOutput(self, "BuildCallbacksEmail", value=callbacks.email)


def main() -> None:
    outdir = os.environ.get("CDK_OUTDIR", str(Path(__file__).resolve().parents[2] / "cdk.out" / "examples" / "cdk-app"))
    app = cdk.App(outdir=outdir)
    AgentsStack(app, "agents-example")
    add_checks(app)
    app.synth()


if __name__ == "__main__":
    main()
