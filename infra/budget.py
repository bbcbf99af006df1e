"""A monthly cost budget for the service, when the deployment asks for one (`monthly_budget_usd`).

The ceilings elsewhere (the stage throttle, the WAF limit per client, the table's maximum request
units) bound what traffic can cost a second; none says what a month has cost. AWS Budgets does: it
emails `budget_emails`, and notifies `alarm_topic_arn`, when the month's cost passes 80 % of the
budget and when its forecast passes all of it.

The budget counts what the service's own resources cost in its region. Every resource the construct
makes carries the cost allocation tag `cairn:service` (its value: the resource name prefix), and the
budget filters on it. AWS counts a tag's costs only once the account activates it as a cost
allocation tag (in the Billing console, once the tag exists), and from then on. CDK's helpers made
once per stack, at its root (the custom resource provider), are outside the service and not counted:
they run while the stack deploys.
"""

from __future__ import annotations

from aws_cdk import Stack, Tags
from aws_cdk import aws_budgets as budgets
from constructs import Construct

COST_TAG = "cairn:service"
# Notified when the month's actual cost passes this share of the budget...
ACTUAL_PERCENT = 80
# ...and when AWS forecasts that the month's cost will pass this share.
FORECAST_PERCENT = 100


class CostBudget(Construct):
    """The budget, with `COST_TAG` put on every resource of `scope` (the service) for it to count."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        monthly_usd: int,
        emails: tuple[str, ...],
        topic_arn: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        Tags.of(scope).add(COST_TAG, name)
        # Budgets are named per account, not per region: a stage deployed in two regions keeps two, each
        # counting its own region's resources.
        region = Stack.of(self).region
        subscribers = [
            *(budgets.CfnBudget.SubscriberProperty(subscription_type="EMAIL", address=email) for email in emails),
            *([budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=topic_arn)] if topic_arn else []),
        ]
        self.budget = budgets.CfnBudget(
            self,
            "Budget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=f"{name}-{region}",
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=monthly_usd, unit="USD"),
                cost_filters={"TagKeyValue": [f"user:{COST_TAG}${name}"], "Region": [region]},
            ),
            notifications_with_subscribers=[
                budgets.CfnBudget.NotificationWithSubscribersProperty(
                    notification=budgets.CfnBudget.NotificationProperty(
                        notification_type=kind,
                        comparison_operator="GREATER_THAN",
                        threshold=percent,
                        threshold_type="PERCENTAGE",
                    ),
                    subscribers=subscribers,
                )
                for kind, percent in (("ACTUAL", ACTUAL_PERCENT), ("FORECASTED", FORECAST_PERCENT))
            ],
        )
