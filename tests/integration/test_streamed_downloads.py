"""Attachments beyond Lambda's buffered cap, through the streaming bootstrap as Lambda starts it.

The attachment function's exec wrapper runs as its own process, with the
environment Lambda gives it, against a Runtime API endpoint and DynamoDB
Local: the code path an attachment download takes in AWS, from the wrapper
script to the bytes on the wire.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import pytest

from cairn.dynamodb.raw_messages import raw_message_store
from cairn.email.ingest import Delivery
from tests.support.lambda_client import LambdaClient, make_services, path_of
from tests.support.runtime_api import (
    BOOTSTRAP,
    FakeRuntimeApi,
    lambda_environment,
    response_headers,
    streaming_function,
)

# Lambda's buffered answers stop at 6 MB, about 4.4 MB of bytes once base64-encoded.
BEYOND_THE_BUFFERED_CAP = 8_000_000


@pytest.fixture
def blob_dir(tmp_path: Path) -> Path:
    return tmp_path / "mail"


@pytest.fixture
def api(dynamodb_local, local_table: str, clock, blob_dir: Path) -> LambdaClient:
    services = make_services(
        table_name=local_table, dynamodb_endpoint=dynamodb_local.endpoint, clock=clock, email_blob_dir=blob_dir
    )
    return LambdaClient(services)


@pytest.fixture
def runtime_api() -> Iterator[FakeRuntimeApi]:
    with FakeRuntimeApi() as endpoint:
        yield endpoint


@pytest.fixture
def bootstrap(runtime_api: FakeRuntimeApi, dynamodb_local, local_table: str, blob_dir: Path) -> Iterator[None]:
    with streaming_function(
        runtime_api,
        table_name=local_table,
        dynamodb_endpoint=dynamodb_local.endpoint,
        email_blob_dir=str(blob_dir),
        poll_rate_per_minute="10000",
    ):
        yield


def deliver_attachment(api: LambdaClient, created: dict, payload: bytes) -> str:
    """Mail with `payload` attached reaches the address; returns its event id."""
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "scanner@example.com", created["address"]["email"], "Scan"
    message.set_content("The scan is attached.")
    message.add_attachment(payload, maintype="application", subtype="zip", filename="scan-2026.zip")
    raw_message_store(api.services.settings).save("m" * 40, message.as_bytes())
    api.services.email.ingest(Delivery(message_id="m" * 40, recipients=[created["address"]["email"]]))
    [event] = [e for e in api.poll(created).json()["events"] if e["type"] == "email.received"]
    return event["id"]


def download_event(api: LambdaClient, created: dict, event_id: str, attachment_id: str, token: str) -> dict:
    url = f"{path_of(created['endpoints']['events_url'])}/{event_id}/attachments/{attachment_id}"
    return api.event("GET", url, token=token)


def test_an_attachment_beyond_the_buffered_cap_arrives_whole(api, runtime_api, bootstrap):
    created = api.provision()
    payload = os.urandom(BEYOND_THE_BUFFERED_CAP)
    event_id = deliver_attachment(api, created, payload)
    token = created["credentials"]["read_token"]

    runtime_api.invoke(download_event(api, created, event_id, "att_1", token))
    posted = runtime_api.next_post(timeout=60)
    assert posted.headers["Lambda-Runtime-Function-Response-Mode"] == "streaming"
    prelude, body = posted.streamed()
    assert prelude["statusCode"] == 200
    headers = response_headers(prelude)
    assert headers["Content-Type"] == "application/zip"
    assert headers["Content-Disposition"] == 'attachment; filename="scan-2026.zip"'
    assert len(body) == len(payload) and body == payload
    assert posted.chunks > 8


def test_refusals_stream_as_cairn_errors_and_the_function_keeps_serving(api, runtime_api, bootstrap):
    created = api.provision()
    event_id = deliver_attachment(api, created, b"PK\x03\x04 small")
    token = created["credentials"]["read_token"]

    runtime_api.invoke(download_event(api, created, event_id, "att_1", "wrong-token"))
    runtime_api.invoke(download_event(api, created, event_id, "att_9", token))
    runtime_api.invoke(download_event(api, created, event_id, "att_1", token))
    unauthorized, missing, served = (runtime_api.next_post(timeout=60).streamed() for _ in range(3))
    assert unauthorized[0]["statusCode"] == 401
    assert missing[0]["statusCode"] == 404
    assert served == (served[0], b"PK\x03\x04 small") and served[0]["statusCode"] == 200


def test_a_broken_cold_start_is_reported_to_lambda(runtime_api):
    environment = lambda_environment(runtime_api, email_attachment_max_bytes="0")
    finished = subprocess.run([str(BOOTSTRAP)], env=environment, cwd="/", timeout=60, capture_output=True, check=False)
    assert finished.returncode == 1
    report = runtime_api.next_post(timeout=5)
    assert report.path == "/2018-06-01/runtime/init/error"
    assert "email_attachment_max_bytes" in report.body.decode()
