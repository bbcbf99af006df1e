"""The monthly cost budget: AWS Budgets counting the service's tagged resources when `monthly_budget_usd`
is set, telling its emails and the alarm topic; nothing when it is not."""

from __future__ import annotations

import pytest

from infra.budget import COST_TAG
from infra.config import StageConfig
from tests.infra.synthesis import FULL_CONTEXT, Synthesis

TOPIC = FULL_CONTEXT["alarm_topic_arn"]
# The function behind CDK's AwsCustomResource, made once per stack at its root, outside the service:
# it runs while the stack deploys, not for the service's traffic.
STACK_SINGLETON = "AWS679f53fac002430cb0da5b7982bd2287"


def test_the_budget_counts_the_services_tagged_resources_by_the_month(full: Synthesis) -> None:
    _, budget = full.only("AWS::Budgets::Budget")
    data = budget["Properties"]["Budget"]
    assert (data["BudgetType"], data["TimeUnit"]) == ("COST", "MONTHLY")
    assert data["BudgetLimit"] == {"Amount": 250, "Unit": "USD"}
    region = {"Ref": "AWS::Region"}
    assert data["CostFilters"] == {"TagKeyValue": [f"user:{COST_TAG}$cairn-prod"], "Region": [region]}
    assert data["BudgetName"] == {"Fn::Join": ["", ["cairn-prod-", region]]}, "a budget per region the stage is in"


def test_the_emails_and_the_alarm_topic_hear_at_80_percent_and_at_a_forecast_past_the_budget(full: Synthesis) -> None:
    _, budget = full.only("AWS::Budgets::Budget")
    told = {
        (entry["Notification"]["NotificationType"], entry["Notification"]["Threshold"]): {
            (subscriber["SubscriptionType"], subscriber["Address"]) for subscriber in entry["Subscribers"]
        }
        for entry in budget["Properties"]["NotificationsWithSubscribers"]
    }
    everyone = {("EMAIL", "ops@example.com"), ("EMAIL", "finance@example.com"), ("SNS", TOPIC)}
    assert told == {("ACTUAL", 80): everyone, ("FORECASTED", 100): everyone}
    for entry in budget["Properties"]["NotificationsWithSubscribers"]:
        assert entry["Notification"]["ComparisonOperator"] == "GREATER_THAN"
        assert entry["Notification"]["ThresholdType"] == "PERCENTAGE"


@pytest.mark.parametrize(
    "resource_type",
    ["AWS::DynamoDB::GlobalTable", "AWS::Lambda::Function", "AWS::ApiGateway::Stage", "AWS::S3::Bucket"],
)
def test_what_costs_the_most_carries_the_tag_the_budget_counts(full: Synthesis, resource_type: str) -> None:
    found = full.resources(resource_type)
    assert found, resource_type
    for logical_id, resource in found.items():
        if logical_id.startswith(STACK_SINGLETON):
            continue
        tags = resource["Properties"].get("Tags") or resource["Properties"].get("Replicas", [{}])[0].get("Tags", [])
        assert {"Key": COST_TAG, "Value": "cairn-prod"} in tags, logical_id


def test_without_a_budget_there_is_none_and_no_tag(default: Synthesis) -> None:
    assert default.resources("AWS::Budgets::Budget") == {}
    assert COST_TAG not in str(default.raw)


@pytest.mark.parametrize(
    ("settings", "complaint"),
    [
        ({"monthly_budget_usd": 0, "budget_emails": ("ops@example.com",)}, "at least 1"),
        ({"monthly_budget_usd": 100}, "someone to tell"),
        ({"budget_emails": ("ops@example.com",)}, "needs 'monthly_budget_usd'"),
        ({"monthly_budget_usd": 100, "budget_emails": ("not an address",)}, "plain email addresses"),
        ({"monthly_budget_usd": 100, "budget_emails": tuple(f"ops{n}@example.com" for n in range(11))}, "at most 10"),
    ],
)
def test_a_budget_that_cannot_tell_anyone_fails_synthesis(settings: dict, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        StageConfig(**settings)


def test_a_budget_told_to_the_alarm_topic_alone_is_enough() -> None:
    arn = "arn:aws:sns:eu-west-1:123456789012:cairn-alarms"
    assert StageConfig(monthly_budget_usd=100, alarm_topic_arn=arn).budget_emails == ()
