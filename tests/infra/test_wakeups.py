"""Wake-ups in the stack: the table's stream, the dispatcher's event source, the sweep, and exact grants."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match
from moto.events.models import EventPattern

from cairn.addresses.models import EventRef, NewEvent
from cairn.dynamodb import address_items
from cairn.dynamodb.stream_records import event_notices
from infra.wakeups import DISPATCH_HANDLER, SWEEP_HANDLER, TARGET_ACTIONS
from tests.infra.synthesis import FULL_CONTEXT, Synthesis

ESM = "AWS::Lambda::EventSourceMapping"


def function_id(synthesis: Synthesis, handler: str) -> str:
    (found,) = [
        logical_id
        for logical_id, resource in synthesis.resources("AWS::Lambda::Function").items()
        if resource["Properties"].get("Handler") == handler
    ]
    return found


def role_id(synthesis: Synthesis, function: str) -> str:
    return synthesis.raw["Resources"][function]["Properties"]["Role"]["Fn::GetAtt"][0]


def target_grants(synthesis: Synthesis, function: str) -> set[tuple[str, str]]:
    """(action, resource) of every statement in `function`'s role that delivers to a target ARN given as text."""
    role = role_id(synthesis, function)
    grants = set()
    for policy in synthesis.resources("AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            grants |= {
                (action, resource)
                for action in actions
                for resource in resources
                if action in TARGET_ACTIONS.values() and isinstance(resource, str)
            }
    return grants


def test_the_table_streams_new_images(default: Synthesis) -> None:
    default.template.has_resource_properties(
        "AWS::DynamoDB::GlobalTable", {"StreamSpecification": {"StreamViewType": "NEW_IMAGE"}}
    )


def test_the_dispatcher_reads_new_events_in_batches_and_reports_failures(default: Synthesis) -> None:
    (mapping,) = default.resources(ESM).values()
    properties = mapping["Properties"]
    assert properties["FunctionName"] == {"Ref": function_id(default, DISPATCH_HANDLER)}
    assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert properties["BisectBatchOnFunctionError"] is True
    assert properties["StartingPosition"] == "TRIM_HORIZON"
    assert properties["MaximumRetryAttempts"] == 10
    # Other addresses' batches of a shard go on while one waits on a slow target.
    assert properties["ParallelizationFactor"] == 10
    destination = properties["DestinationConfig"]["OnFailure"]["Destination"]
    assert destination["Fn::GetAtt"][1] == "Arn"
    assert default.raw["Resources"][destination["Fn::GetAtt"][0]]["Type"] == "AWS::SQS::Queue"
    (pattern,) = [json.loads(item["Pattern"]) for item in properties["FilterCriteria"]["Filters"]]
    assert pattern == {
        "eventName": ["INSERT"],
        "dynamodb": {
            "Keys": {"sk": {"S": [{"prefix": "E#"}]}},
            "NewImage": {address_items.UNSUBSCRIBED: {"BOOL": [{"exists": False}]}},
        },
    }


@pytest.mark.parametrize(("unsubscribed", "delivered"), [(False, True), (True, False)])
def test_the_stream_filter_passes_events_some_subscription_may_be_owed(
    default: Synthesis, unsubscribed: bool, delivered: bool
) -> None:
    """The mapping's filter, applied (by EventBridge's pattern rules, as Lambda applies them) to the
    stream record of an event item as the append writes it."""
    (mapping,) = default.resources(ESM).values()
    (filter_,) = mapping["Properties"]["FilterCriteria"]["Filters"]
    ref = EventRef(id="evt_1", sequence=1)
    item, *_ = address_items.event_items(
        "addr",
        ref,
        NewEvent(type="job.done", source="test", data_json="{}", ingress_surface="inbox"),
        now=1.0,
        expires_at=2,
        unsubscribed=unsubscribed,
    )
    record = {"eventName": "INSERT", "dynamodb": {"Keys": {"pk": item["pk"], "sk": item["sk"]}, "NewImage": item}}
    assert EventPattern.load(filter_["Pattern"]).matches_event(record) is delivered
    assert [notice.unsubscribed for notice in event_notices([record])] == [unsubscribed]


def test_a_schedule_sweeps_due_retries_every_minute(default: Synthesis) -> None:
    default.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(1 minute)",
            "Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [function_id(default, SWEEP_HANDLER), "Arn"]}})],
        },
    )


def test_without_an_allow_list_no_function_may_reach_any_target(default: Synthesis) -> None:
    for handler in (DISPATCH_HANDLER, SWEEP_HANDLER, "cairn.entrypoints.api_handler.lambda_handler"):
        assert target_grants(default, function_id(default, handler)) == set()


def test_each_allow_listed_arn_is_granted_its_one_action_and_nothing_wider(full: Synthesis) -> None:
    patterns: list[str] = FULL_CONTEXT["wake_target_arns"]  # type: ignore[assignment]
    expected = {(TARGET_ACTIONS[pattern.split(":")[2]], pattern) for pattern in patterns}
    for handler in (DISPATCH_HANDLER, SWEEP_HANDLER, "cairn.entrypoints.api_handler.lambda_handler"):
        assert target_grants(full, function_id(full, handler)) == expected, handler


def test_the_allow_list_reaches_the_application(full: Synthesis) -> None:
    environment: dict[str, Any] = full.raw["Resources"][function_id(full, DISPATCH_HANDLER)]["Properties"][
        "Environment"
    ]["Variables"]
    assert json.loads(environment["CAIRN_WAKE_TARGET_ARNS"]) == FULL_CONTEXT["wake_target_arns"]
