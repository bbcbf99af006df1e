"""CairnAddress in a consumer's stack: one provider per service, exact grants, no credential in the template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam

from cairn.cdk import CairnAddress, CairnProps, CairnService
from infra.address import ADDRESS_HANDLER, SECRET_ACTIONS
from infra.checks import add_checks
from tests.infra.synthesis import SKIP_BUNDLING, Synthesis, once_per_run, synthesize_stack


@pytest.fixture(scope="module")
def consumer(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    return once_per_run(tmp_path_factory, "addresses", synthesize_consumer)


def synthesize_consumer(outdir: Path) -> Synthesis:
    app = cdk.App(context=SKIP_BUNDLING, outdir=str(outdir))
    stack = cdk.Stack(app, "Team")
    service = CairnService(stack, "Cairn", props=CairnProps(stage="agents"))
    build = CairnAddress(
        stack,
        "Build",
        service=service,
        task_id="nightly-build",
        expires_in=cdk.Duration.days(1),
        state={"config": {"branch": "main"}},
    )
    CairnAddress(stack, "Review", service=service, task_id="review", expires_in=cdk.Duration.hours(6))
    agent = iam.Role(stack, "Agent", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    build.grant_read(agent)
    cdk.CfnOutput(stack, "BuildEmail", value=build.email)
    add_checks(app)
    return synthesize_stack(app, stack, outdir)


def statements(synthesis: Synthesis, role_prefix: str) -> list[dict[str, Any]]:
    (role,) = [logical_id for logical_id in synthesis.resources("AWS::IAM::Role") if logical_id.startswith(role_prefix)]
    return [
        statement
        for policy in synthesis.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_addresses_synthesize_cdk_nag_clean_with_one_provider(consumer: Synthesis) -> None:
    assert consumer.violations == []
    addresses = consumer.resources("Custom::CairnAddress")
    assert len(addresses) == 2
    assert len({str(a["Properties"]["ServiceToken"]) for a in addresses.values()}) == 1
    handlers = [
        f
        for f in consumer.resources("AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == ADDRESS_HANDLER
    ]
    assert len(handlers) == 1


def test_the_resource_asks_for_the_task_and_lifetime(consumer: Synthesis) -> None:
    (build,) = [
        a for logical_id, a in consumer.resources("Custom::CairnAddress").items() if logical_id.startswith("Build")
    ]
    properties = build["Properties"]
    assert (properties["TaskId"], properties["ExpiresInSeconds"]) == ("nightly-build", "86400")
    assert properties["State"] == {"config": {"branch": "main"}}
    # It provisions through the service's API, after the API's routes exist.
    assert any(dependency.startswith("CairnApiRestApi") for dependency in build["DependsOn"])


def test_grant_read_allows_exactly_reading_that_address_secret(consumer: Synthesis) -> None:
    (build_id,) = [
        logical_id for logical_id in consumer.resources("Custom::CairnAddress") if logical_id.startswith("Build")
    ]
    assert statements(consumer, "Agent") == [
        {
            "Action": ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [build_id, "SecretArn"]},
        }
    ]


def test_the_handler_manages_only_this_stacks_address_secrets(consumer: Synthesis) -> None:
    granted = [
        s
        for s in statements(consumer, "CairnAddressProviderHandler")
        if str(s["Action"]).startswith("['secretsmanager")
    ]
    assert [s["Action"] for s in granted] == [SECRET_ACTIONS]
    (resource,) = [granted[0]["Resource"]]
    assert resource["Fn::Join"][1][-1] == ":secret:cairn-addresses/Team/*"


def test_outputs_and_attributes_carry_no_credential(consumer: Synthesis) -> None:
    # The email is an attribute; the read token and inbox URL exist only in the secret.
    (output,) = consumer.raw["Outputs"]["BuildEmail"]["Value"].values()
    assert output[1] == "Email"
    text = str(consumer.raw)
    assert "read_token" not in text and "inbox_url" not in text


def test_the_inbox_url_is_a_dynamic_reference_to_the_secret() -> None:
    app = cdk.App(context=SKIP_BUNDLING)
    stack = cdk.Stack(app, "Team")
    service = CairnService(stack, "Cairn", props=CairnProps(stage="agents"))
    address = CairnAddress(stack, "Build", service=service, task_id="nightly-build", expires_in=cdk.Duration.days(1))

    resolved = stack.resolve(address.inbox_url)

    resource = stack.resolve(address.secret_arn)  # {"Fn::GetAtt": [<the custom resource>, "SecretArn"]}
    # Resolved by CloudFormation from the secret: the URL itself is never in the template.
    assert resolved == {"Fn::Join": ["", ["{{resolve:secretsmanager:", resource, ":SecretString:inbox_url::}}"]]}
