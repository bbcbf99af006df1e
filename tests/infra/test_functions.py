"""The Lambda functions: what they run, how long they may run, what they are told and allowed."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from infra.code import FUNCTIONS_DIR
from infra.config import LIMIT_DEFAULTS
from infra.storage import FUNCTION_ACTIONS, STORE_ACTIONS
from tests.infra.synthesis import FULL_CONTEXT, Synthesis

FUNCTION = "AWS::Lambda::Function"
API_HANDLER = "cairn.entrypoints.api_handler.lambda_handler"
EMAIL_HANDLER = "cairn.entrypoints.email_handler.lambda_handler"
STREAMING_HANDLER = "cairn.entrypoints.streaming.main"
OUTCOME_HANDLER = "cairn.entrypoints.outbound_events_handler.lambda_handler"
OUTCOME_SWEEP_HANDLER = "cairn.entrypoints.outbound_events_handler.sweep_handler"
DISPATCH_HANDLER = "cairn.entrypoints.wake_handler.stream_handler"
SWEEP_HANDLER = "cairn.entrypoints.wake_handler.sweep_handler"


def cairn_functions(synthesis: Synthesis) -> dict[str, dict[str, Any]]:
    """Cairn's own functions (CDK's custom resource providers run other code)."""
    return {
        logical_id: resource
        for logical_id, resource in synthesis.resources(FUNCTION).items()
        if resource["Properties"]["Handler"].startswith("cairn.")
    }


def function_by_handler(synthesis: Synthesis, handler: str) -> tuple[str, dict[str, Any]]:
    [found] = [
        (logical_id, resource["Properties"])
        for logical_id, resource in cairn_functions(synthesis).items()
        if resource["Properties"]["Handler"] == handler
    ]
    return found


def policy_statements(synthesis: Synthesis, role_id: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in synthesis.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def as_list(value: Any) -> list[Any]:
    """IAM allows a single value or a list wherever a list is meant."""
    return value if isinstance(value, list) else [value]


def role_of(properties: dict[str, Any]) -> str:
    return properties["Role"]["Fn::GetAtt"][0]


def test_without_email_the_api_streaming_and_wake_up_functions_exist(default: Synthesis) -> None:
    handlers = {r["Properties"]["Handler"] for r in cairn_functions(default).values()}
    assert handlers == {API_HANDLER, STREAMING_HANDLER, DISPATCH_HANDLER, SWEEP_HANDLER}


def test_with_email_the_ingest_and_outcome_functions_exist_too(full: Synthesis) -> None:
    handlers = {r["Properties"]["Handler"] for r in cairn_functions(full).values()}
    assert handlers == {
        API_HANDLER,
        EMAIL_HANDLER,
        STREAMING_HANDLER,
        OUTCOME_HANDLER,
        OUTCOME_SWEEP_HANDLER,
        DISPATCH_HANDLER,
        SWEEP_HANDLER,
    }


def test_every_handler_resolves_to_a_function_in_the_code_asset(full: Synthesis) -> None:
    handlers = sorted({r["Properties"]["Handler"] for r in cairn_functions(full).values()})
    # Imported the way Lambda imports it: functions/ is the code root. A fresh
    # interpreter, so nothing this test process imported can stand in for it.
    script = (
        "import importlib, sys\n"
        f"sys.path.insert(0, {str(FUNCTIONS_DIR)!r})\n"
        "for handler in sys.argv[1:]:\n"
        "    module, name = handler.rsplit('.', 1)\n"
        "    loaded = importlib.import_module(module)\n"
        "    assert loaded.__file__.startswith(sys.path[0]), loaded.__file__\n"
        "    assert callable(getattr(loaded, name)), handler\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", script, *handlers],
        env={"AWS_REGION": "us-east-1", "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_functions_run_on_the_newest_python_on_arm64(full: Synthesis) -> None:
    for resource in cairn_functions(full).values():
        properties = resource["Properties"]
        assert properties["Runtime"] == "python3.14"
        assert properties["Architectures"] == ["arm64"]
        assert properties["TracingConfig"] == {"Mode": "Active"}


def test_every_function_shares_one_code_asset(full: Synthesis) -> None:
    codes = {str(r["Properties"]["Code"]) for r in cairn_functions(full).values()}
    assert len(codes) == 1


def test_api_function_concurrency_is_reserved_only_when_asked(default: Synthesis, full: Synthesis) -> None:
    """A reservation sets the writers' share of the account aside; waiting readers have their own function."""
    assert "ReservedConcurrentExecutions" not in function_by_handler(default, API_HANDLER)[1]
    assert function_by_handler(full, API_HANDLER)[1]["ReservedConcurrentExecutions"] == 50


def test_api_function_outlives_the_api_gateway_timeout(default: Synthesis) -> None:
    # API Gateway cuts at 29 s and a long-poll waits up to 25 s; the function
    # must not be the one that stops first.
    _, properties = function_by_handler(default, API_HANDLER)
    assert properties["Timeout"] >= 29
    assert properties["MemorySize"] == 1024


def test_ingest_function_has_time_for_a_large_message(full: Synthesis) -> None:
    _, properties = function_by_handler(full, EMAIL_HANDLER)
    assert properties["Timeout"] >= 60


@pytest.mark.parametrize("handler", [API_HANDLER, EMAIL_HANDLER, STREAMING_HANDLER, OUTCOME_HANDLER])
def test_every_limit_from_context_reaches_the_environment(full: Synthesis, handler: str) -> None:
    _, properties = function_by_handler(full, handler)
    variables = properties["Environment"]["Variables"]
    for key in LIMIT_DEFAULTS:
        assert variables[f"CAIRN_{key.upper()}"] == str(FULL_CONTEXT[key]), key
    assert variables["CAIRN_EMAIL_DOMAIN"] == "mail.example.com"
    assert variables["CAIRN_PUBLIC_BASE_URL"] == "https://api.example.com"


def test_defaults_reach_the_environment_when_context_is_silent(default: Synthesis) -> None:
    _, properties = function_by_handler(default, API_HANDLER)
    variables = properties["Environment"]["Variables"]
    assert {k: variables[f"CAIRN_{k.upper()}"] for k in LIMIT_DEFAULTS} == {
        k: str(v) for k, v in LIMIT_DEFAULTS.items()
    }
    # No custom domain: the application derives links from each request, and
    # no email domain: none is invented.
    assert "CAIRN_PUBLIC_BASE_URL" not in variables
    assert "CAIRN_EMAIL_DOMAIN" not in variables
    assert "CAIRN_EMAIL_BUCKET" not in variables


def test_functions_know_their_table_and_powertools_settings(full: Synthesis) -> None:
    table_id, _ = full.only("AWS::DynamoDB::GlobalTable")
    for resource in cairn_functions(full).values():
        variables = resource["Properties"]["Environment"]["Variables"]
        assert variables["CAIRN_TABLE_NAME"] == {"Ref": table_id}
        assert variables["POWERTOOLS_SERVICE_NAME"] == "cairn"
        assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "Cairn"
        assert variables["POWERTOOLS_LOG_LEVEL"] == "INFO"
        # Events carry read tokens and inbox secrets.
        assert variables["POWERTOOLS_LOGGER_LOG_EVENT"] == "false"
        assert variables["POWERTOOLS_TRACER_CAPTURE_RESPONSE"] == "false"


@pytest.mark.parametrize("handler", [API_HANDLER, EMAIL_HANDLER, STREAMING_HANDLER])
def test_every_function_finds_raw_messages(full: Synthesis, handler: str) -> None:
    bucket_id, _ = full.only("AWS::S3::Bucket")
    _, properties = function_by_handler(full, handler)
    variables = properties["Environment"]["Variables"]
    assert variables["CAIRN_EMAIL_BUCKET"] == {"Ref": bucket_id}
    assert variables["CAIRN_EMAIL_PREFIX"] == "inbound/"


def test_functions_log_to_their_own_retained_log_group(full: Synthesis) -> None:
    log_groups = full.resources("AWS::Logs::LogGroup")
    for resource in cairn_functions(full).values():
        log_group_id = resource["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert log_groups[log_group_id]["Properties"]["RetentionInDays"] == 90
        assert log_groups[log_group_id]["DeletionPolicy"] == "Retain"


# The name each function has in the service (`CairnService`, `infra.storage.FUNCTION_ACTIONS`).
FUNCTION_NAMES = {
    API_HANDLER: "api",
    STREAMING_HANDLER: "streaming",
    EMAIL_HANDLER: "email-ingest",
    OUTCOME_HANDLER: "outbound-outcomes",
    OUTCOME_SWEEP_HANDLER: "outbound-sweep",
    DISPATCH_HANDLER: "wake-dispatcher",
    SWEEP_HANDLER: "wake-sweep",
}


def dynamodb_statements(synthesis: Synthesis, handler: str) -> list[dict[str, Any]]:
    _, properties = function_by_handler(synthesis, handler)
    return [
        s
        for s in policy_statements(synthesis, role_of(properties))
        if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))
    ]


def table_statements(synthesis: Synthesis, handler: str) -> list[dict[str, Any]]:
    """The statements on the table's items (the dispatcher's event source also reads the table's stream)."""
    table_id, _ = synthesis.only("AWS::DynamoDB::GlobalTable")
    return [
        s
        for s in dynamodb_statements(synthesis, handler)
        if {"Fn::GetAtt": [table_id, "Arn"]} in as_list(s["Resource"])
    ]


@pytest.mark.parametrize("handler", list(FUNCTION_NAMES))
def test_each_function_may_run_what_it_uses_on_its_table_and_nothing_more(full: Synthesis, handler: str) -> None:
    table_id, _ = full.only("AWS::DynamoDB::GlobalTable")
    granted = {action for s in table_statements(full, handler) for action in as_list(s["Action"])}
    assert granted == set(FUNCTION_ACTIONS[FUNCTION_NAMES[handler]])
    assert set(FUNCTION_ACTIONS["api"]) == set(STORE_ACTIONS)
    for statement in dynamodb_statements(full, handler):
        assert statement["Effect"] == "Allow"
        resources = as_list(statement["Resource"])
        if resources != [{"Fn::GetAtt": [table_id, "Arn"]}]:
            # Only the dispatcher's event source, and only to read the stream.
            assert handler == DISPATCH_HANDLER and resources == [{"Fn::GetAtt": [table_id, "StreamArn"]}], statement
            assert all(
                action.startswith(
                    (
                        "dynamodb:GetRecords",
                        "dynamodb:GetShardIterator",
                        "dynamodb:DescribeStream",
                        "dynamodb:ListStreams",
                    )
                )
                for action in as_list(statement["Action"])
            )


@pytest.mark.parametrize("handler", [STREAMING_HANDLER, EMAIL_HANDLER, OUTCOME_HANDLER, DISPATCH_HANDLER])
def test_only_the_api_the_sweep_and_mcp_may_delete_and_no_function_but_the_api_writes_in_batches(
    full: Synthesis, handler: str
) -> None:
    """The streaming function deletes for `/mcp`'s delete_state and delete_subscription, one item at a time."""
    granted = {action for s in table_statements(full, handler) for action in as_list(s["Action"])}
    assert "dynamodb:BatchWriteItem" not in granted, handler
    assert ("dynamodb:DeleteItem" in granted) == (handler == STREAMING_HANDLER), handler


def test_the_outcome_sweep_queries_and_deletes_only_the_outcome_deadlines(full: Synthesis) -> None:
    bound = {"dynamodb:Query", "dynamodb:DeleteItem"}
    statements = table_statements(full, OUTCOME_SWEEP_HANDLER)
    for statement in statements:
        actions = set(as_list(statement["Action"]))
        if actions & bound:
            assert len(actions) == 1, statement
            assert statement["Condition"] == {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["OUTCOME#DUE"]}}
    assert {action for s in statements for action in as_list(s["Action"])} >= bound


def test_the_sweep_deletes_only_the_due_retries_it_handed_over(full: Synthesis) -> None:
    deletes = [s for s in table_statements(full, SWEEP_HANDLER) if "dynamodb:DeleteItem" in as_list(s["Action"])]
    assert [as_list(s["Action"]) for s in deletes] == [["dynamodb:DeleteItem"]]
    assert deletes[0]["Condition"] == {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["WAKE#DUE"]}}
    granted = {action for s in table_statements(full, SWEEP_HANDLER) for action in as_list(s["Action"])}
    assert "dynamodb:BatchWriteItem" not in granted


@pytest.mark.parametrize(
    ("handler", "discards"), [(API_HANDLER, True), (EMAIL_HANDLER, True), (STREAMING_HANDLER, False)]
)
def test_functions_may_only_read_raw_messages_and_discard_what_no_address_holds(
    full: Synthesis, handler: str, discards: bool
) -> None:
    bucket_id, _ = full.only("AWS::S3::Bucket")
    bucket_arn = {"Fn::GetAtt": [bucket_id, "Arn"]}
    _, properties = function_by_handler(full, handler)
    statements = {
        action: statement
        for statement in policy_statements(full, role_of(properties))
        for action in as_list(statement["Action"])
        if action.startswith("s3:")
    }
    assert set(statements) == {"s3:GetObject", "s3:ListBucket", *(["s3:DeleteObject"] if discards else [])}
    assert statements["s3:GetObject"]["Resource"] == {"Fn::Join": ["", [bucket_arn, "/inbound/*"]]}
    if discards:
        assert statements["s3:DeleteObject"]["Resource"] == statements["s3:GetObject"]["Resource"]
    # Listing lets S3 answer 404 for an expired message instead of 403.
    assert statements["s3:ListBucket"]["Resource"] == bucket_arn
    assert statements["s3:ListBucket"]["Condition"] == {"StringLike": {"s3:prefix": "inbound/*"}}


def test_no_policy_grants_a_wildcard_action(every_shape: Synthesis) -> None:
    for policy in every_shape.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            for action in as_list(statement["Action"]):
                assert action != "*" and not action.endswith(":*"), (action, statement)


def test_cairn_roles_carry_no_managed_policies(full: Synthesis) -> None:
    for resource in cairn_functions(full).values():
        role = full.resources("AWS::IAM::Role")[role_of(resource["Properties"])]
        assert "ManagedPolicyArns" not in role["Properties"]
