"""Outbound email: SES sends from the domain's identity only, and its outcomes reach the outcome function."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.synthesis import Synthesis
from tests.infra.test_functions import (
    API_HANDLER,
    OUTCOME_HANDLER,
    OUTCOME_SWEEP_HANDLER,
    STREAMING_HANDLER,
    as_list,
    cairn_functions,
    function_by_handler,
    policy_statements,
    role_of,
)

CONFIGURATION_SET = "AWS::SES::ConfigurationSet"


def send_statements(synthesis: Synthesis, role_id: str) -> list[dict[str, Any]]:
    return [s for s in policy_statements(synthesis, role_id) if "ses:SendEmail" in as_list(s["Action"])]


def test_without_an_email_domain_nothing_sends(default: Synthesis) -> None:
    for resource_type in (CONFIGURATION_SET, "AWS::SES::EmailIdentity", "AWS::SNS::Topic"):
        default.template.resource_count_is(resource_type, 0)
    _, api = function_by_handler(default, API_HANDLER)
    assert "CAIRN_OUTBOUND" not in api["Environment"]["Variables"]
    assert send_statements(default, role_of(api)) == []


def test_the_api_function_sends_through_ses_and_the_configuration_set(full: Synthesis) -> None:
    _, configuration_set = full.only(CONFIGURATION_SET)
    assert configuration_set["Properties"]["Name"] == "cairn-prod-outbound"
    # The identity is the operator's, account-wide: the stack never creates one.
    full.template.resource_count_is("AWS::SES::EmailIdentity", 0)
    _, api = function_by_handler(full, API_HANDLER)
    variables = api["Environment"]["Variables"]
    assert (variables["CAIRN_OUTBOUND"], variables["CAIRN_SES_CONFIGURATION_SET"]) == ("ses", "cairn-prod-outbound")


@pytest.mark.parametrize("handler", [API_HANDLER, STREAMING_HANDLER])
def test_only_the_functions_behind_the_mail_tools_may_send_and_only_from_the_domain(
    ephemeral: Synthesis, handler: str
) -> None:
    """The API's send and contact routes, and `/mcp`'s send_email and add_contact in the streaming function."""
    senders = {
        properties["Properties"]["Handler"]
        for properties in cairn_functions(ephemeral).values()
        if send_statements(ephemeral, role_of(properties["Properties"]))
    }
    assert senders == {API_HANDLER, STREAMING_HANDLER}
    _, sender = function_by_handler(ephemeral, handler)
    variables = sender["Environment"]["Variables"]
    assert (variables["CAIRN_OUTBOUND"], variables["CAIRN_SES_CONFIGURATION_SET"]) == ("ses", "cairn-preview-outbound")
    assert "CAIRN_OUTBOUND_FROM" not in variables
    [statement] = send_statements(ephemeral, role_of(sender))
    assert as_list(statement["Action"]) == ["ses:SendEmail"]
    resources = [str(resource) for resource in as_list(statement["Resource"])]
    assert len(resources) == 2
    assert any(":identity/preview.example.com" in resource for resource in resources)
    assert any(":configuration-set/cairn-preview-outbound" in resource for resource in resources)
    assert statement["Condition"] == {
        "StringLike": {"ses:FromAddress": "addr_*@preview.example.com"},
        "StringEquals": {"ses:ApiVersion": "2"},
    }


@pytest.mark.parametrize("handler", [API_HANDLER, STREAMING_HANDLER])
def test_with_an_operator_sender_mail_may_go_from_that_sender_only(full: Synthesis, handler: str) -> None:
    _, sender = function_by_handler(full, handler)
    assert sender["Environment"]["Variables"]["CAIRN_OUTBOUND_FROM"] == "agents@example.com"
    [statement] = send_statements(full, role_of(sender))
    resources = [str(resource) for resource in as_list(statement["Resource"])]
    # SES authorizes a sender on its domain's identity, or on the address's own where only that is verified.
    assert len(resources) == 3
    assert any(":identity/example.com'" in resource for resource in resources)
    assert any(":identity/agents@example.com'" in resource for resource in resources)
    assert any(":configuration-set/cairn-prod-outbound" in resource for resource in resources)
    assert statement["Condition"] == {
        "StringEquals": {"ses:FromAddress": "agents@example.com", "ses:ApiVersion": "2"},
    }


def test_outcomes_flow_from_the_configuration_set_to_the_outcome_function(full: Synthesis) -> None:
    configuration_set_id, _ = full.only(CONFIGURATION_SET)
    topic_id, topic = full.only("AWS::SNS::Topic")
    assert "KmsMasterKeyId" in topic["Properties"]
    _, destination = full.only("AWS::SES::ConfigurationSetEventDestination")
    definition = destination["Properties"]["EventDestination"]
    assert definition["SnsDestination"] == {"TopicARN": {"Ref": topic_id}}
    assert sorted(definition["MatchingEventTypes"]) == ["bounce", "complaint", "delivery", "reject", "renderingFailure"]
    outcome_id, outcome = function_by_handler(full, OUTCOME_HANDLER)
    _, subscription = full.only("AWS::SNS::Subscription")
    assert subscription["Properties"]["Protocol"] == "lambda"
    assert subscription["Properties"]["TopicArn"] == {"Ref": topic_id}
    assert subscription["Properties"]["Endpoint"] == {"Fn::GetAtt": [outcome_id, "Arn"]}
    # SES may publish for this configuration set only, and the function writes the table.
    [publish] = [
        statement
        for policy in full.resources("AWS::SNS::TopicPolicy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Principal") == {"Service": "ses.amazonaws.com"}
    ]
    assert publish["Action"] == "sns:Publish" and publish["Effect"] == "Allow"
    source = publish["Condition"]["StringEquals"]["AWS:SourceArn"]["Fn::Join"][1]
    assert source[-2:] == [":configuration-set/", {"Ref": configuration_set_id}]
    actions = {action for s in policy_statements(full, role_of(outcome)) for action in as_list(s["Action"])}
    assert any(action.startswith("dynamodb:") for action in actions)


def test_ses_may_use_the_topic_key_for_this_configuration_set_only(full: Synthesis) -> None:
    _, key = full.only("AWS::KMS::Key")
    [statement] = [
        statement
        for statement in key["Properties"]["KeyPolicy"]["Statement"]
        if statement.get("Principal") == {"Service": "ses.amazonaws.com"}
    ]
    conditions = statement["Condition"]["StringEquals"]
    assert conditions["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    source = conditions["aws:SourceArn"]["Fn::Join"][1]
    assert source[0] == "arn:" and source[-1] == ":configuration-set/cairn-prod-outbound"
    assert ":ses:" in source


def test_outcomes_that_fail_every_retry_wait_in_an_encrypted_queue(full: Synthesis) -> None:
    outcome_id, _ = function_by_handler(full, OUTCOME_HANDLER)
    [invoke_config] = [
        resource["Properties"]
        for resource in full.resources("AWS::Lambda::EventInvokeConfig").values()
        if resource["Properties"]["FunctionName"] == {"Ref": outcome_id}
    ]
    queue_id = invoke_config["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0]
    queue = full.raw["Resources"][queue_id]
    assert queue["Type"] == "AWS::SQS::Queue"
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    # What SNS could not hand to the function lands in the same queue.
    _, subscription = full.only("AWS::SNS::Subscription")
    assert subscription["Properties"]["RedrivePolicy"] == {"deadLetterTargetArn": {"Fn::GetAtt": [queue_id, "Arn"]}}
    _, role = function_by_handler(full, OUTCOME_HANDLER)
    sends = [s for s in policy_statements(full, role_of(role)) if "sqs:SendMessage" in as_list(s["Action"])]
    assert [s["Resource"] for s in sends] == [{"Fn::GetAtt": [queue_id, "Arn"]}]


def test_a_schedule_settles_outcome_deadlines_every_five_minutes(full: Synthesis, default: Synthesis) -> None:
    sweep_id, sweep = function_by_handler(full, OUTCOME_SWEEP_HANDLER)
    [rule] = [
        resource["Properties"]
        for resource in full.resources("AWS::Events::Rule").values()
        if resource["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [sweep_id, "Arn"]}
    ]
    assert rule["ScheduleExpression"] == "rate(5 minutes)"
    # It records outcomes and never sends: it is not told how to.
    assert "CAIRN_OUTBOUND" not in sweep["Environment"]["Variables"]
    assert send_statements(full, role_of(sweep)) == []
    # Without outbound mail, no send reserves a slot and there is nothing to sweep.
    assert OUTCOME_SWEEP_HANDLER not in {r["Properties"]["Handler"] for r in cairn_functions(default).values()}
