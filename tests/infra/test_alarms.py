"""Alarms: the failures a user would feel, each with an alarm, all notifying one topic."""

from __future__ import annotations

from typing import Any

from tests.infra.synthesis import FULL_CONTEXT, Synthesis

ALARM = "AWS::CloudWatch::Alarm"


def alarms_by_name(synthesis: Synthesis, stack_name: str) -> dict[str, dict[str, Any]]:
    return {
        alarm["Properties"]["AlarmName"].removeprefix(f"{stack_name}-"): alarm["Properties"]
        for alarm in synthesis.resources(ALARM).values()
    }


def test_every_failure_has_an_alarm(default: Synthesis, full: Synthesis) -> None:
    assert set(alarms_by_name(default, "cairn-test")) == {
        "api-5xx-rate",
        "api-errors",
        "api-throttles",
        # Throttles here mean readers reached the streaming function's reserved concurrency.
        "streaming-errors",
        "streaming-throttles",
        "table-throttles",
        "table-system-errors",
        "wake-dispatcher-errors",
        "wake-dispatcher-throttles",
        "wake-sweep-errors",
        "wake-sweep-throttles",
        "wake-failed-batches",
        "wake-iterator-age",
    }
    assert set(alarms_by_name(full, "cairn-prod")) == set(alarms_by_name(default, "cairn-test")) | {
        "email-ingest-errors",
        "email-ingest-throttles",
        "email-failed-ingest",
        "outbound-outcomes-errors",
        "outbound-outcomes-throttles",
        "outbound-sweep-errors",
        "outbound-sweep-throttles",
        "outbound-failed-outcomes",
    }


def test_outcomes_that_failed_every_retry_alarm_from_their_queue(full: Synthesis) -> None:
    alarm = alarms_by_name(full, "cairn-prod")["outbound-failed-outcomes"]
    assert (alarm["MetricName"], alarm["Statistic"], alarm["Threshold"]) == (
        "ApproximateNumberOfMessagesVisible",
        "Maximum",
        1,
    )
    [dimension] = alarm["Dimensions"]
    queue_id = dimension["Value"]["Fn::GetAtt"][0]
    outcome_id = next(
        logical_id
        for logical_id, resource in full.resources("AWS::Lambda::Function").items()
        if resource["Properties"]["Handler"] == "cairn.entrypoints.outbound_events_handler.lambda_handler"
    )
    [invoke_config] = [
        resource["Properties"]
        for resource in full.resources("AWS::Lambda::EventInvokeConfig").values()
        if resource["Properties"]["FunctionName"] == {"Ref": outcome_id}
    ]
    assert invoke_config["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [queue_id, "Arn"]}


def test_5xx_alarm_is_a_rate_over_enough_requests(default: Synthesis) -> None:
    alarm = alarms_by_name(default, "cairn-test")["api-5xx-rate"]
    [expression] = [m for m in alarm["Metrics"] if "Expression" in m]
    assert expression["Expression"] == "IF(requests >= 20, 100 * errors / requests, 0)"
    names = {m["Id"]: m["MetricStat"]["Metric"]["MetricName"] for m in alarm["Metrics"] if "MetricStat" in m}
    assert names == {"errors": "5XXError", "requests": "Count"}
    assert alarm["Threshold"] == 5


def test_table_alarms_cover_transactions(default: Synthesis) -> None:
    alarm = alarms_by_name(default, "cairn-test")["table-throttles"]
    operations = {
        dimension["Value"]
        for metric in alarm["Metrics"]
        if "MetricStat" in metric
        for dimension in metric["MetricStat"]["Metric"]["Dimensions"]
        if dimension["Name"] == "Operation"
    }
    assert {"TransactWriteItems", "GetItem", "Query", "BatchWriteItem"} <= operations


def test_alarms_notify_the_topic_from_context(full: Synthesis) -> None:
    topic = FULL_CONTEXT["alarm_topic_arn"]
    for alarm in full.resources(ALARM).values():
        assert alarm["Properties"]["AlarmActions"] == [topic]
        assert alarm["Properties"]["OKActions"] == [topic]


def test_without_a_topic_alarms_only_change_state(default: Synthesis) -> None:
    for alarm in default.resources(ALARM).values():
        assert "AlarmActions" not in alarm["Properties"]
        assert alarm["Properties"]["TreatMissingData"] == "notBreaching"


def test_wake_ups_alarm_on_failed_batches_and_a_lagging_stream(default: Synthesis) -> None:
    alarms = alarms_by_name(default, "cairn-test")
    assert alarms["wake-failed-batches"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
    lag = alarms["wake-iterator-age"]
    assert (lag["MetricName"], lag["Statistic"], lag["Threshold"]) == ("IteratorAge", "Maximum", 60_000)
