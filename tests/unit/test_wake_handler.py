"""The stream handler's answer to Lambda: the earliest record of an address it could not handle."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from cairn.wakeups.models import EventNotice


class FailingFor:
    """A dispatcher that cannot handle one address."""

    def __init__(self, address_id: str) -> None:
        self.address_id = address_id
        self.seen: list[EventNotice] = []

    def dispatch(self, notices: list[EventNotice], *, until: Callable[[], bool]) -> list[EventNotice]:
        self.seen.extend(notices)
        self.until = until
        return [notice for notice in notices if notice.address_id == self.address_id]


class Context:
    function_name = "wake"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:wake"
    aws_request_id = "req"
    remaining_ms = 300_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def record(address: str, sequence: int, stream_sequence: str, event_name: str = "INSERT") -> dict[str, Any]:
    image = {"pk": {"S": f"A#{address}"}, "sk": {"S": f"E#{sequence:012d}"}, "type": {"S": "job.done"}}
    return {"eventName": event_name, "dynamodb": {"Keys": image, "NewImage": image, "SequenceNumber": stream_sequence}}


@pytest.fixture
def handler(moto_env: None, monkeypatch: pytest.MonkeyPatch):
    from cairn.entrypoints import wake_handler

    return wake_handler


def test_failures_are_reported_from_the_earliest_failed_record(handler, monkeypatch: pytest.MonkeyPatch):
    dispatcher = FailingFor("addr_b")
    monkeypatch.setattr(handler, "services", SimpleNamespace(dispatcher=dispatcher))
    event = {
        "Records": [
            record("addr_a", 1, "100"),
            record("addr_b", 4, "200"),
            record("addr_b", 5, "300"),
            record("addr_a", 2, "400", event_name="MODIFY"),
        ]
    }
    answer = handler.stream_handler(event, Context())
    assert answer == {"batchItemFailures": [{"itemIdentifier": "200"}]}
    assert [(notice.address_id, notice.sequence) for notice in dispatcher.seen] == [
        ("addr_a", 1),
        ("addr_b", 4),
        ("addr_b", 5),
    ]


def test_a_handled_batch_reports_nothing(handler, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(handler, "services", SimpleNamespace(dispatcher=FailingFor("nobody")))
    assert handler.stream_handler({"Records": [record("addr_a", 1, "1")]}, Context()) == {"batchItemFailures": []}


def test_no_delivery_starts_too_near_the_deadline_to_finish(handler, monkeypatch: pytest.MonkeyPatch):
    dispatcher = FailingFor("nobody")
    monkeypatch.setattr(handler, "services", SimpleNamespace(dispatcher=dispatcher))
    context = Context()
    handler.stream_handler({"Records": [record("addr_a", 1, "100")]}, context)
    assert dispatcher.until() is False
    context.remaining_ms = 45_000  # under a sender's run and its last attempt's deadline
    assert dispatcher.until() is True
