"""CairnService inside a consumer's own stack: two services side by side, cdk-nag clean, exact grants."""

from __future__ import annotations

import ast
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn

from cairn.cdk import CairnProps, CairnService
from infra.api import API_HANDLER
from infra.checks import add_checks
from infra.code import FUNCTIONS_DIR
from infra.config import PROJECT_DIR, StageConfig
from infra.props import MEANINGS, props_table
from infra.wakeups import DISPATCH_HANDLER, SWEEP_HANDLER
from tests.infra.synthesis import SKIP_BUNDLING, Synthesis, once_per_run, synthesize_stack


@pytest.fixture(scope="module")
def consumer(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    """A team's stack: two Cairn services with email, one agent role, one wake-up queue."""
    return once_per_run(tmp_path_factory, "two-services", synthesize_consumer)


def synthesize_consumer(outdir: Path) -> Synthesis:
    app = cdk.App(context=SKIP_BUNDLING, outdir=str(outdir))
    stack = cdk.Stack(app, "Team")
    agents = CairnService(stack, "Agents", props=CairnProps(stage="agents", email_domain="agents.example.com"))
    CairnService(stack, "Tools", props=CairnProps(stage="tools", email_domain="tools.example.com"))
    role = iam.Role(stack, "AgentRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    agents.grant_runtime_invoke(role)
    queue = sqs.Queue(stack, "Callbacks", enforce_ssl=True)
    agents.grant_wake_target(queue)
    # The queue is the consumer's, not Cairn's: the consumer acknowledges its own findings.
    cdk.Validations.of(queue).acknowledge(
        cdk.Acknowledgment(
            id="AwsSolutions::AwsSolutions-SQS3",
            reason="A test queue that stands for a consumer's wake-up target; its dead-letter queue is "
            "the consumer's choice and not part of what Cairn's construct defines or checks.",
        )
    )
    add_checks(app)
    return synthesize_stack(app, stack, outdir)


def function_id(synthesis: Synthesis, service: str, handler: str) -> str:
    (found,) = [
        logical_id
        for logical_id, resource in synthesis.resources("AWS::Lambda::Function").items()
        if resource["Properties"].get("Handler") == handler and logical_id.startswith(service)
    ]
    return found


def statements(synthesis: Synthesis, role: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in synthesis.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def role_of(synthesis: Synthesis, function: str) -> str:
    return synthesis.raw["Resources"][function]["Properties"]["Role"]["Fn::GetAtt"][0]


def test_two_services_in_one_stack_synthesize_cdk_nag_clean(consumer: Synthesis) -> None:
    assert consumer.violations == []
    assert len(consumer.resources("AWS::DynamoDB::GlobalTable")) == 2
    assert len(consumer.resources("AWS::ApiGateway::RestApi")) == 2


@pytest.mark.parametrize(
    ("resource_type", "name"),
    [
        ("AWS::CloudWatch::Alarm", "AlarmName"),
        ("AWS::ApiGateway::RestApi", "Name"),
        ("AWS::SES::ReceiptRuleSet", "RuleSetName"),
        ("AWS::SES::ConfigurationSet", "Name"),
    ],
)
def test_physical_names_never_collide_between_the_services(consumer: Synthesis, resource_type: str, name: str) -> None:
    names = [resource["Properties"][name] for resource in consumer.resources(resource_type).values()]
    assert len(names) == len(set(names)) > 1
    # Each name says which service it belongs to.
    assert {n.startswith("Team-Agents-") for n in names} == {True, False}
    assert all(n.startswith(("Team-Agents-", "Team-Tools-")) for n in names)


def test_grant_runtime_invoke_allows_exactly_the_runtime_and_memory_routes(consumer: Synthesis) -> None:
    (role,) = [logical_id for logical_id in consumer.resources("AWS::IAM::Role") if logical_id.startswith("AgentRole")]
    (statement,) = statements(consumer, role)
    assert statement["Action"] == "execute-api:Invoke"
    assert statement["Effect"] == "Allow"
    paths = sorted(resource["Fn::Join"][1][-1] for resource in statement["Resource"])
    assert paths == ["/*/api/v1/memory", "/*/api/v1/memory/*", "/*/api/v1/runtime", "/*/api/v1/runtime/*"]
    # On the first service's API only.
    refs = {part["Ref"] for resource in statement["Resource"] for part in resource["Fn::Join"][1] if "Ref" in part}
    assert refs - {"AWS::Partition", "AWS::Region", "AWS::AccountId"} == {
        logical_id for logical_id in consumer.resources("AWS::ApiGateway::RestApi") if logical_id.startswith("Agents")
    } | {logical_id for logical_id in consumer.resources("AWS::ApiGateway::Stage") if logical_id.startswith("Agents")}


@pytest.mark.parametrize("handler", [API_HANDLER, DISPATCH_HANDLER, SWEEP_HANDLER])
def test_grant_wake_target_gives_each_sender_the_one_action_on_the_one_queue(consumer: Synthesis, handler: str) -> None:
    (queue,) = consumer.resources("AWS::SQS::Queue").keys() & {
        logical_id for logical_id in consumer.resources("AWS::SQS::Queue") if logical_id.startswith("Callbacks")
    }
    queue_arn = {"Fn::GetAtt": [queue, "Arn"]}
    granted = [
        s
        for s in statements(consumer, role_of(consumer, function_id(consumer, "Agents", handler)))
        if s["Resource"] == queue_arn
    ]
    assert granted == [{"Action": "sqs:SendMessage", "Effect": "Allow", "Resource": queue_arn}]
    # The other service was granted nothing.
    other = statements(consumer, role_of(consumer, function_id(consumer, "Tools", handler)))
    assert all(s["Resource"] != queue_arn for s in other)


def test_grant_wake_target_puts_the_target_on_the_allow_list(consumer: Synthesis) -> None:
    (queue,) = [
        logical_id for logical_id in consumer.resources("AWS::SQS::Queue") if logical_id.startswith("Callbacks")
    ]
    agents = consumer.raw["Resources"][function_id(consumer, "Agents", API_HANDLER)]["Properties"]
    allow_list = agents["Environment"]["Variables"]["CAIRN_WAKE_TARGET_ARNS"]
    # A JSON list built at deploy time: `["` + the queue's ARN + `"]`.
    assert allow_list == {"Fn::Join": ["", ['["', {"Fn::GetAtt": [queue, "Arn"]}, '"]']]}
    tools = consumer.raw["Resources"][function_id(consumer, "Tools", API_HANDLER)]["Properties"]
    assert "CAIRN_WAKE_TARGET_ARNS" not in tools["Environment"]["Variables"]


def test_the_only_outputs_are_the_api_endpoints(consumer: Synthesis) -> None:
    # Read tokens, inbox secrets and keys never travel through a template: API Gateway's own
    # endpoint output is all there is, and the consumer chooses the rest.
    outputs = consumer.raw["Outputs"]
    assert all(output["Value"]["Fn::Join"][1][0] == "https://" for output in outputs.values())
    assert len(outputs) == 2


def test_metric_helpers_name_the_alarms_metrics() -> None:
    app = cdk.App(context=SKIP_BUNDLING)
    service = CairnService(cdk.Stack(app, "Team"), "Cairn", props=CairnProps(stage="agents"))
    assert service.metric_function_errors("api").to_metric_config().metric_stat.metric_name == "Errors"  # type: ignore[union-attr]
    assert service.metric_wake_iterator_age().to_metric_config().metric_stat.metric_name == "IteratorAge"  # type: ignore[union-attr]
    assert service.metric_api_server_error_rate().to_metric_config().math_expression is not None
    with pytest.raises(KeyError):
        service.metric_email_failed_ingest()  # no email domain: no such alarm


def test_a_service_without_props_synthesizes_with_the_defaults(tmp_path: Path) -> None:
    app = cdk.App(context=SKIP_BUNDLING, outdir=str(tmp_path))
    stack = cdk.Stack(app, "Team")
    CairnService(stack, "Cairn")
    add_checks(app)
    synthesis = synthesize_stack(app, stack, tmp_path)
    assert synthesis.violations == []
    _, stage = synthesis.only("AWS::ApiGateway::Stage")
    assert stage["Properties"]["StageName"] == CairnProps().stage == "prod"
    _, api = synthesis.only("AWS::ApiGateway::RestApi")
    assert api["Properties"]["Name"].startswith("Team-Cairn-")  # named from its path, as with props
    # No email domain by default: no mail resources.
    assert synthesis.resources("AWS::SES::ReceiptRuleSet") == {}


def test_props_are_the_stage_configuration_with_its_messages() -> None:
    assert CairnProps is StageConfig
    with pytest.raises(ValueError, match="must start with a letter"):
        CairnProps(stage="1st")
    with pytest.raises(ValueError, match="'name_prefix'"):
        CairnProps(stage="agents", name_prefix="x" * 56)


def test_no_function_module_imports_the_construct_library() -> None:
    # The CDK stays out of every Lambda's import path.
    package = FUNCTIONS_DIR / "cairn"
    for module in package.rglob("*.py"):
        if module.is_relative_to(package / "cdk"):
            continue
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert not any(n.startswith(("cairn.cdk", "infra", "aws_cdk")) for n in names), Path(module)


def test_every_prop_has_a_meaning() -> None:
    assert set(MEANINGS) == {field.name for field in fields(StageConfig)}


def test_the_docs_props_table_is_the_generated_one() -> None:
    page = (PROJECT_DIR / "docs" / "cdk.md").read_text()
    start = page.index("<!-- props table:")
    table = page[page.index("\n", start) + 1 : page.index("<!-- end of props table -->")]
    assert table == props_table(), "regenerate it: python -m infra.props"


def test_the_docs_example_synthesizes(tmp_path: Path) -> None:
    page = (PROJECT_DIR / "docs" / "cdk.md").read_text()
    example = page[page.index("```python\n") + len("```python\n") : page.index("```\n", page.index("```python"))]
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs/cdk.md", "exec"), namespace)
    app = cdk.App(context=SKIP_BUNDLING, outdir=str(tmp_path))
    stack = namespace["AgentStack"](app, "Agents")
    app.synth()
    template = json.loads((tmp_path / stack.template_file).read_text())
    assert "CairnUrl" in template["Outputs"]
    alarms = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert any(
        a["Properties"].get("MetricName") == "IteratorAge" and a["Properties"]["Threshold"] == 30_000 for a in alarms
    )


def test_each_kind_of_wake_target_gets_its_one_action(tmp_path: Path) -> None:
    app = cdk.App(context=SKIP_BUNDLING, outdir=str(tmp_path))
    stack = cdk.Stack(app, "Team")
    service = CairnService(
        stack,
        "Cairn",
        props=CairnProps(stage="agents", wake_target_arns=("arn:aws:sqs:us-east-1:123456789012:agent-*",)),
    )
    bus = events.EventBus.from_event_bus_arn(stack, "Bus", "arn:aws:events:us-east-1:123456789012:event-bus/agents")
    machine = sfn.StateMachine.from_state_machine_arn(
        stack, "Flow", "arn:aws:states:us-east-1:123456789012:stateMachine:flow"
    )
    function = lambda_.Function.from_function_arn(stack, "Run", "arn:aws:lambda:us-east-1:123456789012:function:run")
    for target in (bus, machine, function):
        service.grant_wake_target(target)
    synthesis = synthesize_stack(app, stack, tmp_path)

    dispatcher = function_id(synthesis, "Cairn", DISPATCH_HANDLER)
    granted = {
        (statement["Action"], statement["Resource"])
        for statement in statements(synthesis, role_of(synthesis, dispatcher))
        if isinstance(statement["Resource"], str) and ":123456789012:" in statement["Resource"]
    }
    assert granted == {
        ("sqs:SendMessage", "arn:aws:sqs:us-east-1:123456789012:agent-*"),
        ("events:PutEvents", "arn:aws:events:us-east-1:123456789012:event-bus/agents"),
        ("states:SendTaskSuccess", "arn:aws:states:us-east-1:123456789012:stateMachine:flow"),
        ("lambda:InvokeFunction", "arn:aws:lambda:us-east-1:123456789012:function:run"),
    }
    # The props' patterns first, then every granted target, in the order granted.
    variables = synthesis.raw["Resources"][dispatcher]["Properties"]["Environment"]["Variables"]
    assert json.loads(variables["CAIRN_WAKE_TARGET_ARNS"]) == [
        "arn:aws:sqs:us-east-1:123456789012:agent-*",
        "arn:aws:events:us-east-1:123456789012:event-bus/agents",
        "arn:aws:states:us-east-1:123456789012:stateMachine:flow",
        "arn:aws:lambda:us-east-1:123456789012:function:run",
    ]
