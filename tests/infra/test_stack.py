"""The synthesized CloudFormation template says what Cairn deploys.

Synthesis costs seconds per process, so each configuration is synthesized
once per module and every test reads the shared template.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from infra.config import StageConfig
from infra.stack import CairnStack

PROJECT_DIR = Path(__file__).resolve().parents[2]
TABLE = "AWS::DynamoDB::GlobalTable"  # what TableV2 synthesizes to
FUNCTION = "AWS::Lambda::Function"
STORE_ACTIONS = {
    f"dynamodb:{action}"
    for action in ("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem")
}


def synthesize(context: dict[str, Any]) -> Template:
    """Template of the stack built from CDK context, the way app.py builds it."""
    app = cdk.App(context=context)
    config = StageConfig.from_context(app.node)
    return Template.from_stack(CairnStack(app, config.stack_name, config=config))


def _as_list(value: Any) -> list[Any]:
    """IAM allows a single value or a list wherever a list is meant."""
    return value if isinstance(value, list) else [value]


def only_logical_id(template: Template, resource_type: str) -> str:
    resources = template.find_resources(resource_type)
    assert len(resources) == 1, f"expected one {resource_type}, found {sorted(resources)}"
    return next(iter(resources))


@pytest.fixture(scope="module")
def template() -> Template:
    return synthesize({"stage": "test"})


@pytest.fixture(scope="module")
def ephemeral_template() -> Template:
    # A string, as `cdk synth -c ephemeral=true` passes it.
    return synthesize({"stage": "preview", "ephemeral": "true"})


@pytest.fixture(scope="module")
def table_id(template: Template) -> str:
    return only_logical_id(template, TABLE)


@pytest.fixture(scope="module")
def function(template: Template) -> dict[str, Any]:
    return template.find_resources(FUNCTION)[only_logical_id(template, FUNCTION)]


# --- table -------------------------------------------------------------------


def test_table_has_string_pk_sk_keys_and_on_demand_billing(template: Template) -> None:
    template.has_resource_properties(
        TABLE,
        {
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": Match.array_with(
                [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ]
            ),
            "BillingMode": "PAY_PER_REQUEST",
        },
    )


def test_table_expires_items_by_expires_at(template: Template) -> None:
    template.has_resource_properties(
        TABLE,
        {"TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True}},
    )


def test_table_has_point_in_time_recovery(template: Template) -> None:
    template.has_resource_properties(
        TABLE,
        {
            "Replicas": [
                Match.object_like(
                    {"PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True}}
                )
            ]
        },
    )


def test_table_is_retained_and_protected_by_default(template: Template) -> None:
    template.has_resource(
        TABLE,
        {
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
            "Properties": {
                "Replicas": [Match.object_like({"DeletionProtectionEnabled": True})]
            },
        },
    )


def test_ephemeral_stage_table_is_deleted_with_the_stack(ephemeral_template: Template) -> None:
    ephemeral_template.has_resource(
        TABLE,
        {
            "DeletionPolicy": "Delete",
            "UpdateReplacePolicy": "Delete",
            "Properties": {
                "Replicas": [Match.object_like({"DeletionProtectionEnabled": False})]
            },
        },
    )


# --- function ----------------------------------------------------------------


def test_function_runs_the_api_handler_on_python_312_arm64(function: dict[str, Any]) -> None:
    properties = function["Properties"]
    assert properties["Runtime"] == "python3.12"
    assert properties["Architectures"] == ["arm64"]
    assert properties["Handler"] == "cairn.api.handler.lambda_handler"
    assert properties["MemorySize"] == 1024


def test_function_outlives_the_api_gateway_timeout(function: dict[str, Any]) -> None:
    # API Gateway cuts at 29 s; the function must not be the one that stops first.
    assert function["Properties"]["Timeout"] >= 29


def test_function_is_configured_through_its_environment(
    function: dict[str, Any], table_id: str
) -> None:
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["CAIRN_TABLE_NAME"] == {"Ref": table_id}
    assert variables["POWERTOOLS_SERVICE_NAME"] == "cairn"
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "Cairn"
    assert variables["POWERTOOLS_LOG_LEVEL"] == "INFO"


def test_function_may_touch_only_its_table(
    template: Template, function: dict[str, Any], table_id: str
) -> None:
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    table_arn = {"Fn::GetAtt": [table_id, "Arn"]}
    dynamodb_statements = [
        (policy, statement)
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if any(action.startswith("dynamodb:") for action in _as_list(statement["Action"]))
    ]

    assert dynamodb_statements, "the function cannot reach DynamoDB at all"
    for policy, statement in dynamodb_statements:
        assert policy["Properties"]["Roles"] == [{"Ref": role_id}]
        assert statement["Effect"] == "Allow"
        assert _as_list(statement["Resource"]) == [table_arn]
    granted = {a for _, s in dynamodb_statements for a in _as_list(s["Action"])}
    # TransactWriteItems has no IAM action of its own: each part is authorized as
    # the item action it performs, so conditions need ConditionCheckItem.
    assert STORE_ACTIONS <= granted


# --- API ---------------------------------------------------------------------


def test_api_proxies_every_path_to_the_function(template: Template) -> None:
    function_id = only_logical_id(template, FUNCTION)
    template.resource_count_is("AWS::ApiGateway::RestApi", 1)
    template.has_resource_properties("AWS::ApiGateway::Resource", {"PathPart": "{proxy+}"})
    template.has_resource_properties(
        "AWS::ApiGateway::Method",
        {
            "HttpMethod": "ANY",
            "Integration": Match.object_like(
                {
                    "Type": "AWS_PROXY",
                    "Uri": {
                        "Fn::Join": ["", Match.array_with([{"Fn::GetAtt": [function_id, "Arn"]}])]
                    },
                }
            ),
        },
    )


def test_api_stage_is_named_after_the_stage(template: Template) -> None:
    template.has_resource_properties("AWS::ApiGateway::Stage", {"StageName": "test"})


def test_api_base_url_is_an_output(template: Template) -> None:
    rest_api_id = only_logical_id(template, "AWS::ApiGateway::RestApi")
    url = template.find_outputs("ApiUrl")["ApiUrl"]["Value"]
    assert url["Fn::Join"][1][0] == "https://"
    assert {"Ref": rest_api_id} in url["Fn::Join"][1]


# --- configuration -----------------------------------------------------------


@pytest.mark.parametrize(
    "context",
    [
        {},
        {"stage": "has_underscore"},
        {"stage": "dev", "ephemeral": "yes"},
    ],
)
def test_unusable_context_is_refused_before_synthesis(context: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        StageConfig.from_context(cdk.App(context=context).node)


# --- app entry point ---------------------------------------------------------


def test_app_synthesizes_offline_with_cdk_json_defaults(tmp_path: Path) -> None:
    # No AWS credentials, region or CLI-provided context: the app must not need them.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env |= {"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_OUTDIR": str(tmp_path)}

    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    written = json.loads((tmp_path / "cairn-dev.template.json").read_text())
    assert TABLE in {resource["Type"] for resource in written["Resources"].values()}
