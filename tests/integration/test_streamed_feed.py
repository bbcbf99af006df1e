"""The feed's event stream through the streaming bootstrap as Lambda starts it, on DynamoDB Local.

The code path a stream takes in AWS: the exec wrapper's own process with
Lambda's environment and Lambda's waiter (it re-reads DynamoDB; no
in-process notification reaches it), posting each chunk to a Runtime API
endpoint as the stream makes it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from cairn.client.sse import Comment, Message, parse
from tests.support.lambda_client import LambdaClient, make_services, path_of
from tests.support.runtime_api import FakeRuntimeApi, response_headers, streaming_function

STREAM_SECONDS = 6


@pytest.fixture
def api(dynamodb_local, local_table: str, clock) -> LambdaClient:
    return LambdaClient(make_services(table_name=local_table, dynamodb_endpoint=dynamodb_local.endpoint, clock=clock))


@pytest.fixture
def runtime_api() -> Iterator[FakeRuntimeApi]:
    with FakeRuntimeApi() as endpoint:
        yield endpoint


@pytest.fixture
def bootstrap(runtime_api: FakeRuntimeApi, dynamodb_local, local_table: str) -> Iterator[None]:
    with streaming_function(
        runtime_api,
        table_name=local_table,
        dynamodb_endpoint=dynamodb_local.endpoint,
        poll_rate_per_minute="10000",
        max_stream_seconds=str(STREAM_SECONDS),
        stream_heartbeat_seconds="1",
    ):
        yield


def feed_request(api: LambdaClient, created: dict, **headers: str) -> dict:
    url = path_of(created["endpoints"]["events_url"])
    return api.event("GET", url, token=created["credentials"]["read_token"], headers=headers)


def test_a_stream_reaches_the_runtime_api_event_by_event_then_a_poll_is_served(api, runtime_api, bootstrap):
    created = api.provision()
    api.post_inbox(created, {"type": "before"})
    runtime_api.invoke(feed_request(api, created, Accept="text/event-stream"))
    runtime_api.invoke(feed_request(api, created))  # a plain poll, served after the stream ends
    threading.Timer(1.5, api.post_inbox, args=(created, {"type": "during"})).start()

    streamed = runtime_api.next_post(timeout=60)
    prelude, body = streamed.streamed()
    assert prelude["statusCode"] == 200
    assert response_headers(prelude)["Content-Type"] == "text/event-stream"
    items = list(parse(body.decode().splitlines()))
    assert [(item.id, item.event) for item in items if isinstance(item, Message)] == [("1", "before"), ("2", "during")]
    assert sum(isinstance(item, Comment) for item in items) >= 2
    # The event posted mid-stream went out when it committed, seconds before the stream ended.
    [during] = [moment for moment, chunk in streamed.arrivals if b"event: during" in chunk]
    assert streamed.arrivals[-1][0] - during > 2

    polled = runtime_api.next_post(timeout=60)
    prelude, body = polled.streamed()
    assert prelude["statusCode"] == 200
    assert b'"type":"during"' in body


def test_a_refused_stream_is_a_json_error_and_the_function_keeps_serving(api, runtime_api, bootstrap):
    created = api.provision()
    runtime_api.invoke(feed_request(api, created, Accept="text/event-stream", **{"Last-Event-ID": "x"}))
    runtime_api.invoke(feed_request(api, created))
    refused, served = (runtime_api.next_post(timeout=60).streamed() for _ in range(2))
    assert refused[0]["statusCode"] == 400 and b"invalid_request" in refused[1]
    assert served[0]["statusCode"] == 200
