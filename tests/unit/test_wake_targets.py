"""AWS wake-up targets on moto: what is sent, and to whom."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from cairn.addresses.models import Event
from cairn.wakeups.aws_targets import AwsTargets
from cairn.wakeups.models import Subscription, Target, TargetKind
from cairn.wakeups.payload import event_delivery

REGION = "us-east-1"
ADDRESS = "addr_" + "a" * 26


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws(config={"lambda": {"use_docker": False}}):
        yield


class Recorder:
    """Clients that remember each call's operation and parameters, as they leave for AWS (moto here)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def client(self, service: str) -> Any:
        made = boto3.client(service, region_name=REGION)
        made.meta.events.register("provide-client-params.*.*", self._record)
        return made

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.calls.append((model.name, dict(params)))


def subscription(kind: TargetKind, **params: str) -> Subscription:
    return Subscription("sub_" + "0" * 24, ADDRESS, Target(kind, params), (), None, 0.0)


def event(data: Any = None, sequence: int = 7) -> Event:
    text = json.dumps(data if data is not None else {"build": "green"})
    return Event("evt_7_abcd", sequence, "job.done", "ci", text, 1_700_000_000.0, 1_800_000_000.0, "http")


def send(kind: TargetKind, recorder: Recorder, item: Event | None = None, **params: str):
    target = subscription(kind, **params)
    return AwsTargets(recorder.client).send(target, event_delivery(ADDRESS, target.id, item or event()))


def test_sqs_gets_the_delivery_as_the_message_body(aws: None):
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.create_queue(QueueName="agent-jobs")["QueueUrl"]
    recorder = Recorder()
    outcome = send(TargetKind.SQS, recorder, queue_url=queue_url)
    assert outcome.delivered
    (message,) = sqs.receive_message(QueueUrl=queue_url)["Messages"]
    body = json.loads(message["Body"])
    assert (body["address_id"], body["sequence"], body["event"]["data"]) == (ADDRESS, 7, {"build": "green"})
    assert recorder.calls == [("SendMessage", {"QueueUrl": queue_url, "MessageBody": message["Body"]})]


def test_a_fifo_queue_orders_by_subscription_and_deduplicates_by_event(aws: None):
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.create_queue(QueueName="agent-jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    recorder = Recorder()
    assert send(TargetKind.SQS, recorder, queue_url=queue_url).delivered
    assert send(TargetKind.SQS, recorder, queue_url=queue_url).delivered
    assert len(sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]) == 1
    params = recorder.calls[0][1]
    assert params["MessageGroupId"] == f"{ADDRESS}.sub_{'0' * 24}"
    assert params["MessageDeduplicationId"] == "evt_7_abcd"


def test_a_missing_queue_is_a_failure_to_retry(aws: None):
    outcome = send(TargetKind.SQS, Recorder(), queue_url=f"https://sqs.{REGION}.amazonaws.com/123456789012/none")
    assert not outcome.delivered and not outcome.gone
    assert outcome.error


def test_eventbridge_gets_one_entry_on_the_named_bus(aws: None):
    events = boto3.client("events", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    bus_arn = events.create_event_bus(Name="agents")["EventBusArn"]
    queue_url = sqs.create_queue(QueueName="seen")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="all", EventBusName="agents", EventPattern=json.dumps({"source": ["cairn"]}))
    events.put_targets(Rule="all", EventBusName="agents", Targets=[{"Id": "q", "Arn": queue_arn}])
    recorder = Recorder()
    assert send(TargetKind.EVENTBRIDGE, recorder, event_bus_arn=bus_arn, detail_type="Agent wake-up").delivered
    (message,) = sqs.receive_message(QueueUrl=queue_url)["Messages"]
    seen = json.loads(message["Body"])
    assert (seen["source"], seen["detail-type"]) == ("cairn", "Agent wake-up")
    assert seen["detail"]["event"]["id"] == "evt_7_abcd"
    ((operation, params),) = recorder.calls
    assert operation == "PutEvents"
    assert params["Entries"][0]["EventBusName"] == bus_arn


def test_eventbridge_detail_type_defaults_to_the_event_type(aws: None):
    bus_arn = boto3.client("events", region_name=REGION).create_event_bus(Name="agents")["EventBusArn"]
    recorder = Recorder()
    send(TargetKind.EVENTBRIDGE, recorder, event_bus_arn=bus_arn)
    assert recorder.calls[0][1]["Entries"][0]["DetailType"] == "job.done"


@pytest.mark.parametrize(
    ("event_type", "sent"),
    [("t" * 256, "t" * 128), ("job\ndone", "cairn.event"), ("\u202e", "cairn.event"), (" ", "cairn.event")],
    ids=["256 characters", "a line break", "a bidi override", "blank"],
)
def test_a_type_eventbridge_would_refuse_is_sent_as_one_it_takes(aws: None, event_type: str, sent: str):
    """EventBridge takes a DetailType of at most 128 characters: a stranger's longer type failed the delivery
    on every retry, and the owner's subscription at the end of its window."""
    bus_arn = boto3.client("events", region_name=REGION).create_event_bus(Name="agents")["EventBusArn"]
    recorder = Recorder()
    item = Event("evt_7_abcd", 7, event_type, "ci", "{}", 1_700_000_000.0, 1_800_000_000.0, "http")
    assert send(TargetKind.EVENTBRIDGE, recorder, item, event_bus_arn=bus_arn).delivered
    entry = recorder.calls[0][1]["Entries"][0]
    assert entry["DetailType"] == sent and json.loads(entry["Detail"])["type"] == event_type


def test_what_sqs_takes_no_message_with_is_escaped(aws: None):
    """SQS refuses a message holding U+FFFE or U+FFFF, which an inbox post may hold."""
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.create_queue(QueueName="agent-jobs")["QueueUrl"]
    recorder = Recorder()
    assert send(TargetKind.SQS, recorder, event({"text": "a\ufffeb\uffffc\ufffd"}), queue_url=queue_url).delivered
    body = recorder.calls[0][1]["MessageBody"]
    assert "\ufffe" not in body and "\uffff" not in body
    assert json.loads(body)["event"]["data"] == {"text": "a\ufffeb\uffffc\ufffd"}


def test_a_large_event_reaches_eventbridge_without_its_data(aws: None):
    bus_arn = boto3.client("events", region_name=REGION).create_event_bus(Name="agents")["EventBusArn"]
    recorder = Recorder()
    assert send(TargetKind.EVENTBRIDGE, recorder, event({"text": "x" * 400_000}), event_bus_arn=bus_arn).delivered
    detail = json.loads(recorder.calls[0][1]["Entries"][0]["Detail"])
    assert detail["event"]["data_omitted"] is True
    assert "data" not in detail["event"]
    assert detail["sequence"] == 7


def test_lambda_is_invoked_asynchronously_with_the_delivery(aws: None):
    role = boto3.client("iam", region_name=REGION).create_role(RoleName="run", AssumeRolePolicyDocument="{}")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("handler.py", "def handle(event, context):\n    return event\n")
    function_arn = boto3.client("lambda", region_name=REGION).create_function(
        FunctionName="agent-run",
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler="handler.handle",
        Code={"ZipFile": archive.getvalue()},
    )["FunctionArn"]
    recorder = Recorder()
    outcome = send(TargetKind.LAMBDA, recorder, function_arn=function_arn)
    assert (outcome.delivered, outcome.status_code) == (True, 202)
    ((operation, params),) = recorder.calls
    assert (operation, params["FunctionName"], params["InvocationType"]) == ("Invoke", function_arn, "Event")
    assert json.loads(params["Payload"])["event"]["id"] == "evt_7_abcd"


def test_step_functions_completes_the_task_with_the_event_as_output(aws: None):
    recorder = Recorder()
    assert send(TargetKind.STEP_FUNCTIONS, recorder, task_token="token-123").delivered
    ((operation, params),) = recorder.calls
    assert (operation, params["taskToken"]) == ("SendTaskSuccess", "token-123")
    assert json.loads(params["output"])["event"]["type"] == "job.done"


def test_a_task_that_no_longer_waits_ends_the_subscription():
    class Gone:
        def send_task_success(self, **_: Any) -> None:
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "TaskTimedOut", "Message": "too late"}}, "SendTaskSuccess")

    target = subscription(TargetKind.STEP_FUNCTIONS, task_token="token-123")
    outcome = AwsTargets(lambda service: Gone()).send(target, event_delivery(ADDRESS, target.id, event()))
    assert (outcome.delivered, outcome.gone) == (False, True)
