"""A durable function as a wake-up target: its executions allow-listed, its callbacks granted, never its invoke."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs

from cairn.cdk import CairnProps, CairnService
from infra.api import API_HANDLER
from infra.checks import add_checks
from infra.wakeups import DISPATCH_HANDLER, SWEEP_HANDLER
from tests.infra.synthesis import SKIP_BUNDLING, Synthesis, once_per_run, synthesize_stack

SENDERS = (API_HANDLER, DISPATCH_HANDLER, SWEEP_HANDLER)
PROPS_PATTERN = "arn:aws:lambda:us-east-1:123456789012:function:release:*/durable-execution/*"
CALLBACK_ACTION = "lambda:SendDurableExecutionCallbackSuccess"


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    """A team's stack: Cairn, with a props pattern of durable executions, and a durable function granted to it."""
    return once_per_run(tmp_path_factory, "durable", synthesize_team)


def synthesize_team(outdir: Path) -> Synthesis:
    app = cdk.App(context=SKIP_BUNDLING, outdir=str(outdir))
    stack = cdk.Stack(app, "Team")
    cairn = CairnService(stack, "Cairn", props=CairnProps(stage="agents", wake_target_arns=(PROPS_PATTERN,)))
    approvals = lambda_.Function(
        stack,
        "Approvals",
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return event\n"),
        durable_config=lambda_.DurableConfig(execution_timeout=cdk.Duration.days(2)),
    )
    cairn.grant_wake_target(approvals, durable_callbacks=True)
    # The function is the consumer's, not Cairn's: the consumer acknowledges its own findings.
    cdk.Validations.of(approvals).acknowledge(
        cdk.Acknowledgment(
            id="AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSLambdaBasicDurableExecutionRolePolicy]",
            reason="A test function that stands for a consumer's durable function; its role is the consumer's choice.",
        )
    )
    add_checks(app)
    return synthesize_stack(app, stack, outdir)


def function_id(synthesis: Synthesis, handler: str) -> str:
    (found,) = [
        logical_id
        for logical_id, resource in synthesis.resources("AWS::Lambda::Function").items()
        if resource["Properties"].get("Handler") == handler and logical_id.startswith("Cairn")
    ]
    return found


def grants(synthesis: Synthesis, function: str) -> list[tuple[Any, Any]]:
    """(action, resource) of every statement in `function`'s role."""
    role = synthesis.raw["Resources"][function]["Properties"]["Role"]["Fn::GetAtt"][0]
    return [
        (statement["Action"], statement["Resource"])
        for policy in synthesis.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def approvals_id(synthesis: Synthesis) -> str:
    (found,) = [logical_id for logical_id in synthesis.resources("AWS::Lambda::Function") if "Approvals" in logical_id]
    return found


def test_the_stack_with_a_durable_target_is_cdk_nag_clean(team: Synthesis) -> None:
    assert team.violations == []


@pytest.mark.parametrize("handler", SENDERS)
def test_each_sender_may_complete_the_functions_callbacks_and_not_invoke_it(team: Synthesis, handler: str) -> None:
    executions = {"Fn::Join": ["", [{"Fn::GetAtt": [approvals_id(team), "Arn"]}, ":*/durable-execution/*"]]}
    granted = grants(team, function_id(team, handler))
    assert (CALLBACK_ACTION, executions) in granted
    assert (CALLBACK_ACTION, PROPS_PATTERN) in granted
    # Exactly one action on each: the function is never invoked, nor its executions read or stopped.
    on_targets = [action for action, resource in granted if resource in (executions, PROPS_PATTERN)]
    assert on_targets == [CALLBACK_ACTION, CALLBACK_ACTION]
    assert not [resource for action, resource in granted if action == "lambda:InvokeFunction"]


def test_the_functions_executions_join_the_allow_list(team: Synthesis) -> None:
    variables = team.raw["Resources"][function_id(team, API_HANDLER)]["Properties"]["Environment"]["Variables"]
    # A JSON list built at deploy time: the props' pattern, then the granted function's executions.
    assert variables["CAIRN_WAKE_TARGET_ARNS"] == {
        "Fn::Join": [
            "",
            [
                json.dumps([PROPS_PATTERN])[:-1] + ',"',
                {"Fn::GetAtt": [approvals_id(team), "Arn"]},
                ':*/durable-execution/*"]',
            ],
        ]
    }


def test_durable_callbacks_are_a_functions_only(tmp_path: Path) -> None:
    app = cdk.App(context=SKIP_BUNDLING, outdir=str(tmp_path))
    stack = cdk.Stack(app, "Team")
    cairn = CairnService(stack, "Cairn", props=CairnProps(stage="agents"))
    queue = sqs.Queue.from_queue_arn(stack, "Jobs", "arn:aws:sqs:us-east-1:123456789012:jobs")
    with pytest.raises(TypeError, match="durable_callbacks"):
        cairn.grant_wake_target(queue, durable_callbacks=True)
    assert cairn.wake_target_arns() == []
