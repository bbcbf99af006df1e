"""Provisioning under an `Idempotency-Key`: a retry gets the same address and credentials, in memory;
what the table holds, on moto."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import secrets
import string
import uuid

import boto3
import pytest

from cairn.addresses.provisioning import looks_random
from tests.support.lambda_client import LambdaClient, path_of

BODY = {"task_id": "nightly-build", "expires_in_seconds": 3600}


def provision(api: LambdaClient, key: str, body: dict | None = None):
    return api.request(
        "POST", "/api/v1/addresses", json_body=BODY if body is None else body, headers={"Idempotency-Key": key}
    )


def table_items() -> list[dict]:
    return boto3.client("dynamodb", region_name="us-east-1").scan(TableName="cairn-test")["Items"]


def from_key_alone(key: str, purpose: str, address_id: str) -> str:
    """A credential as anyone holding the key can compute it offline: an HMAC of the public id under the key."""
    mac = hmac.new(key.encode(), f"cairn/{purpose}/{address_id}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def test_a_retry_answers_the_same_address_and_credentials_that_work(memory_api: LambdaClient):
    key = secrets.token_urlsafe(32)
    first = provision(memory_api, key)
    again = provision(memory_api, key)

    assert first.status == again.status == 201
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    created = again.json()
    posted = memory_api.post_inbox(created, {"type": "job.done"})
    assert posted.status == 202, posted.text
    assert memory_api.poll(created).json()["events"][0]["type"] == "job.done"


def test_neither_the_key_nor_the_credentials_are_stored(moto_api: LambdaClient):
    key = secrets.token_urlsafe(32)
    created = provision(moto_api, key).json()
    dump = json.dumps(table_items())
    for secret in (key, created["credentials"]["read_token"], created["endpoints"]["inbox_url"].rsplit("/", 1)[1]):
        assert secret not in dump


def test_different_keys_make_different_addresses(memory_api: LambdaClient):
    one = provision(memory_api, secrets.token_urlsafe(32)).json()
    other = provision(memory_api, secrets.token_urlsafe(32)).json()
    assert one["address"]["id"] != other["address"]["id"]
    assert one["credentials"]["read_token"] != other["credentials"]["read_token"]


def test_the_key_for_another_request_is_refused_and_makes_nothing(moto_api: LambdaClient):
    key = secrets.token_urlsafe(32)
    provision(moto_api, key)
    before = len(table_items())

    refused = provision(moto_api, key, {**BODY, "task_id": "another-task"})

    assert refused.status == 422 and refused.error_code == "idempotency_key_reused", refused.text
    assert len(table_items()) == before


def test_the_key_and_the_public_address_id_do_not_open_the_address(memory_api: LambdaClient):
    key = secrets.token_urlsafe(32)
    created = provision(memory_api, key).json()
    address_id = created["address"]["id"]
    offline_token = "crt_" + from_key_alone(key, "read-token", address_id)
    offline_inbox = (
        created["endpoints"]["inbox_url"].rsplit("/", 1)[0] + "/" + from_key_alone(key, "inbox-secret", address_id)
    )

    assert created["credentials"]["read_token"] != offline_token
    described = memory_api.request("GET", path_of(created["endpoints"]["address_url"]), token=offline_token)
    assert (described.status, described.error_code) == (401, "unauthorized")
    posted = memory_api.request("POST", path_of(offline_inbox), json_body={"type": "forged"})
    assert (posted.status, posted.error_code) == (401, "unauthorized")
    # The credentials handed out still work, and a retry still answers them.
    assert memory_api.poll(created).status == 200
    assert provision(memory_api, key).json() == created


def test_an_address_provisioned_before_the_server_secret_is_still_answered_on_retry(moto_api: LambdaClient):
    """A claim without a derivation mark was made when credentials came from the key alone: a retry derives
    them that way again, so the address and credentials its client holds are answered as before."""
    key = secrets.token_urlsafe(32)
    address_id = provision(moto_api, key).json()["address"]["id"]
    legacy_token = "crt_" + from_key_alone(key, "read-token", address_id)
    legacy_inbox = from_key_alone(key, "inbox-secret", address_id)
    client = boto3.client("dynamodb", region_name="us-east-1")
    # The items as the earlier version wrote them: no mark on the claim, digests of the key-alone credentials.
    client.update_item(
        TableName="cairn-test",
        Key={"pk": {"S": f"PROVISION#{hashlib.sha256(key.encode()).hexdigest()}"}, "sk": {"S": "META"}},
        UpdateExpression="REMOVE derivation",
    )
    client.update_item(
        TableName="cairn-test",
        Key={"pk": {"S": f"A#{address_id}"}, "sk": {"S": "META"}},
        UpdateExpression="SET read_token_digest = :read, inbox_secret_digest = :inbox",
        ExpressionAttributeValues={
            ":read": {"S": hashlib.sha256(legacy_token.encode()).hexdigest()},
            ":inbox": {"S": hashlib.sha256(legacy_inbox.encode()).hexdigest()},
        },
    )

    again = provision(moto_api, key)

    assert again.status == 201 and again.headers["Idempotent-Replayed"] == "true", again.text
    answered = again.json()
    assert answered["address"]["id"] == address_id
    assert answered["credentials"]["read_token"] == legacy_token
    assert answered["endpoints"]["inbox_url"].endswith("/" + legacy_inbox)
    assert moto_api.post_inbox(answered, {"type": "still.works"}).status == 202
    assert moto_api.poll(answered).json()["events"][0]["type"] == "still.works"


@pytest.mark.parametrize(
    "key",
    ["x" * 32, "ab" * 20, "0123456789abcdef" * 2, "x" * 28 + "abcdef", "00000000-0000-0000-0000-000000000000"],
    ids=["one-character", "two-characters", "repeated-pattern", "mostly-one-character", "nil-uuid"],
)
def test_a_key_no_random_draw_would_give_is_refused_before_anything_is_written(moto_api: LambdaClient, key: str):
    before = len(table_items())
    refused = provision(moto_api, key)
    assert refused.status == 400 and refused.error_code == "idempotency_key_not_random", refused.text
    assert refused.json()["error"]["field"] == "Idempotency-Key"
    assert len(table_items()) == before


def test_random_keys_of_every_common_shape_are_accepted(memory_api: LambdaClient):
    draw = random.Random(27)
    shapes = {
        "uuid4": lambda: str(uuid.UUID(int=draw.getrandbits(128), version=4)),
        "hex": lambda: "".join(draw.choices("0123456789abcdef", k=32)),
        "digits": lambda: "".join(draw.choices(string.digits, k=40)),
        "base64url": lambda: "".join(draw.choices(string.ascii_letters + string.digits + "-_", k=43)),
    }
    for shape, make in shapes.items():
        assert all(looks_random(make()) for _ in range(2_000)), shape
    assert provision(memory_api, str(uuid.uuid4())).status == 201


@pytest.mark.parametrize("key", ["short", "x" * 31, "\x01" * 40, "k" * 300], ids=["short", "31", "controls", "long"])
def test_a_guessable_or_malformed_key_is_refused_before_anything_is_written(moto_api: LambdaClient, key: str):
    before = len(table_items())
    refused = provision(moto_api, key)
    assert refused.status == 400 and refused.error_code == "invalid_request", refused.text
    assert refused.json()["error"]["field"] == "Idempotency-Key"
    assert len(table_items()) == before


def test_a_retry_after_the_address_was_deleted_makes_no_new_one(memory_api: LambdaClient):
    key = secrets.token_urlsafe(32)
    created = provision(memory_api, key).json()
    deleted = memory_api.request(
        "DELETE", path_of(created["endpoints"]["address_url"]), token=created["credentials"]["read_token"]
    )
    assert deleted.status == 200, deleted.text

    again = provision(memory_api, key)

    assert again.status == 422 and again.error_code == "idempotency_key_reused"
    assert "deleted or expired" in again.json()["error"]["message"]


def test_a_replay_is_answered_even_when_the_creation_rate_is_spent(clock):
    api = LambdaClient.in_memory(clock, create_rate_per_minute=1)
    key = secrets.token_urlsafe(32)
    first = provision(api, key)
    assert api.request("POST", "/api/v1/addresses").status == 429
    again = provision(api, key)
    assert again.status == 201 and again.json() == first.json()
