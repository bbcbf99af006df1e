#!/usr/bin/env python3
"""A team's own CDK app with Cairn in it: a service, an address declared as a resource, an agent that
reads the address's credentials and calls the runtime routes, and a state machine that waits for the
address's callback: its task subscribes the execution's task token to the address, and Cairn's wake-up
completes the task (SendTaskSuccess) with the first `build.completed` event.

`python examples/cdk-app/team_app.py` synthesizes it (cdk-nag included) into cdk.out/examples/cdk-app.
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
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from cairn.cdk import CairnAddress, CairnProps, CairnService
from infra.checks import acknowledge, add_checks

AGENT_CODE = """
import os


def handler(event, context):
    # A real agent reads its address from the secret (CAIRN_ADDRESS_SECRET) and calls CAIRN_URL.
    return {"address_secret": os.environ["CAIRN_ADDRESS_SECRET"], "cairn_url": os.environ["CAIRN_URL"]}
"""


SUBSCRIBE_CODE = '''
import json
import os
import urllib.request

import boto3


def handler(event, context):
    """Subscribe this execution's task token to the address: its next build.completed event completes the task."""
    secret = boto3.client("secretsmanager").get_secret_value(SecretId=os.environ["CAIRN_ADDRESS_SECRET"])
    address = json.loads(secret["SecretString"])
    body = {"target": {"kind": "step_functions", "task_token": event["task_token"]}, "types": ["build.completed"]}
    request = urllib.request.Request(
        address["address_url"] + "/subscriptions",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": "Bearer " + address["read_token"], "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return {"subscription": json.loads(answer.read())["subscription"]["id"]}
'''

# The state machine is allow-listed by its name: `cairn.grant_wake_target(flow)` would make the service's
# functions refer to the state machine, whose task reads the address the service provisions (a cycle).
FLOW_NAME = "cairn-example-build-flow"


class AgentsStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        props = CairnProps(
            stage="agents", ephemeral=True, wake_target_arns=(f"arn:aws:states:*:*:stateMachine:{FLOW_NAME}",)
        )
        cairn = CairnService(self, "Cairn", props=props)
        callbacks = CairnAddress(
            self,
            "BuildCallbacks",
            service=cairn,
            task_id="nightly-build",
            expires_in=cdk.Duration.days(30),
            state={"config": {"branch": "main"}},
        )

        agent = self._function("Agent", "Agent", AGENT_CODE, callbacks, environment={"CAIRN_URL": cairn.api_url})
        cairn.grant_runtime_invoke(agent)

        # Waits, with nothing running, until the build's callback reaches the address.
        subscriber = self._function(
            "SubscribeToCallback", "Subscriber", SUBSCRIBE_CODE, callbacks, timeout=cdk.Duration.seconds(15)
        )
        wait_for_build = tasks.LambdaInvoke(
            self,
            "WaitForBuild",
            lambda_function=subscriber,
            integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
            payload=sfn.TaskInput.from_object({"task_token": sfn.JsonPath.task_token}),
            task_timeout=sfn.Timeout.duration(cdk.Duration.hours(24)),
        )
        flow = sfn.StateMachine(
            self,
            "BuildFlow",
            state_machine_name=FLOW_NAME,
            definition_body=sfn.DefinitionBody.from_chainable(wait_for_build.next(sfn.Pass(self, "BuildDone"))),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=logs.LogGroup(self, "BuildFlowLogs", retention=logs.RetentionDays.ONE_MONTH),
                level=sfn.LogLevel.ALL,
            ),
        )
        acknowledge(
            flow,
            "AwsSolutions-IAM5[Resource::*]",
            "Step Functions' log delivery calls (logs:CreateLogDelivery and the rest) and X-Ray's support no "
            "resource-level permissions; CDK adds them for the state machine's own logging and tracing.",
        )
        subscriber_id = self.get_logical_id(subscriber.node.default_child)  # type: ignore[arg-type]
        acknowledge(
            flow,
            f"AwsSolutions-IAM5[Resource::<{subscriber_id}.Arn>:*]",
            "The task invokes the subscriber function; CDK's grant covers its versions and aliases (`:*`).",
        )
        cdk.CfnOutput(self, "CairnUrl", value=cairn.api_url)
        cdk.CfnOutput(self, "BuildCallbacksEmail", value=callbacks.email)

    def _function(
        self,
        construct_id: str,
        prefix: str,
        code: str,
        address: CairnAddress,
        *,
        environment: dict[str, str] | None = None,
        timeout: cdk.Duration | None = None,
    ) -> lambda_.Function:
        """An inline function with its own role and log group, granted the address's secret (named in its
        environment as CAIRN_ADDRESS_SECRET)."""
        role = iam.Role(self, f"{prefix}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        log_group = logs.LogGroup(self, f"{prefix}Logs", retention=logs.RetentionDays.ONE_MONTH)
        log_group.grant_write(role)
        function = lambda_.Function(
            self,
            construct_id,
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.handler",
            code=lambda_.Code.from_inline(code),
            role=role,
            log_group=log_group,
            timeout=timeout,
            environment={"CAIRN_ADDRESS_SECRET": address.secret_arn, **(environment or {})},
        )
        address.grant_read(function)
        return function


def main() -> None:
    outdir = os.environ.get("CDK_OUTDIR", str(Path(__file__).resolve().parents[2] / "cdk.out" / "examples" / "cdk-app"))
    app = cdk.App(outdir=outdir)
    AgentsStack(app, "agents-example")
    add_checks(app)
    app.synth()


if __name__ == "__main__":
    main()
