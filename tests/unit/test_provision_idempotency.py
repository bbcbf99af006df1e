"""Provisioning under an `Idempotency-Key`: a retry gets the same address and credentials, on moto."""

from __future__ import annotations

import json
import secrets

import boto3
import pytest

from tests.support.lambda_client import LambdaClient, path_of

BODY = {"task_id": "nightly-build", "expires_in_seconds": 3600}


def provision(api: LambdaClient, key: str, body: dict | None = None):
    return api.request("POST", "/api/v1/addresses", json_body=BODY if body is None else body,
                       headers={"Idempotency-Key": key})


def table_items() -> list[dict]:
    return boto3.client("dynamodb", region_name="us-east-1").scan(TableName="cairn-test")["Items"]


def test_a_retry_answers_the_same_address_and_credentials_that_work(moto_api: LambdaClient):
    key = secrets.token_urlsafe(32)
    first = provision(moto_api, key)
    again = provision(moto_api, key)

    assert first.status == again.status == 201
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    created = again.json()
    posted = moto_api.post_inbox(created, {"type": "job.done"})
    assert posted.status == 202, posted.text
    assert moto_api.poll(created).json()["events"][0]["type"] == "job.done"


def test_neither_the_key_nor_the_credentials_are_stored(moto_api: LambdaClient):
    key = secrets.token_urlsafe(32)
    created = provision(moto_api, key).json()
    dump = json.dumps(table_items())
    for secret in (key, created["credentials"]["read_token"], created["endpoints"]["inbox_url"].rsplit("/", 1)[1]):
        assert secret not in dump


def test_different_keys_make_different_addresses(moto_api: LambdaClient):
    one = provision(moto_api, secrets.token_urlsafe(32)).json()
    other = provision(moto_api, secrets.token_urlsafe(32)).json()
    assert one["address"]["id"] != other["address"]["id"]
    assert one["credentials"]["read_token"] != other["credentials"]["read_token"]


def test_the_key_for_another_request_is_refused_and_makes_nothing(moto_api: LambdaClient):
    key = secrets.token_urlsafe(32)
    provision(moto_api, key)
    before = len(table_items())

    refused = provision(moto_api, key, {**BODY, "task_id": "another-task"})

    assert refused.status == 422 and refused.error_code == "idempotency_key_reused", refused.text
    assert len(table_items()) == before


@pytest.mark.parametrize("key", ["short", "x" * 31, "\x01" * 40, "k" * 300], ids=["short", "31", "controls", "long"])
def test_a_guessable_or_malformed_key_is_refused_before_anything_is_written(moto_api: LambdaClient, key: str):
    before = len(table_items())
    refused = provision(moto_api, key)
    assert refused.status == 400 and refused.error_code == "invalid_request", refused.text
    assert refused.json()["error"]["field"] == "Idempotency-Key"
    assert len(table_items()) == before


def test_a_retry_after_the_address_was_deleted_makes_no_new_one(moto_api: LambdaClient):
    key = secrets.token_urlsafe(32)
    created = provision(moto_api, key).json()
    deleted = moto_api.request("DELETE", path_of(created["endpoints"]["address_url"]),
                               token=created["credentials"]["read_token"])
    assert deleted.status == 200, deleted.text

    again = provision(moto_api, key)

    assert again.status == 422 and again.error_code == "idempotency_key_reused"
    assert "deleted or expired" in again.json()["error"]["message"]


def test_a_replay_is_answered_even_when_the_creation_rate_is_spent(moto_env, clock):
    api = LambdaClient.on_moto(clock, create_rate_per_minute=1)
    key = secrets.token_urlsafe(32)
    first = provision(api, key)
    assert api.request("POST", "/api/v1/addresses").status == 429
    again = provision(api, key)
    assert again.status == 201 and again.json() == first.json()
