"""Floods cannot freeze an owner: the reserve, the trim and the mail rate on DynamoDB Local."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest

from tests.support.lambda_client import LambdaClient, make_services, path_of

MAX_EVENTS = 40
RESERVE = 5
OUTSIDER_SLOTS = MAX_EVENTS - RESERVE


@pytest.fixture
def api(dynamodb_local, local_table, clock) -> LambdaClient:
    return LambdaClient(
        make_services(
            table_name=local_table,
            dynamodb_endpoint=dynamodb_local.endpoint,
            clock=clock,
            max_events=MAX_EVENTS,
            owner_reserved_events=RESERVE,
        )
    )


def put_state(api: LambdaClient, created: dict, key: str, value) -> int:
    url = f"{path_of(created['endpoints']['state_url'])}/{key}"
    return api.request("PUT", url, json_body={"value": value}, token=created["credentials"]["read_token"]).status


def delete_state(api: LambdaClient, created: dict, key: str) -> int:
    url = f"{path_of(created['endpoints']['state_url'])}/{key}"
    return api.request("DELETE", url, token=created["credentials"]["read_token"]).status


def trim(api: LambdaClient, created: dict, through: int, **flags: str):
    query = "&".join(f"{name}={value}" for name, value in {"through": through, **flags}.items())
    url = f"{path_of(created['endpoints']['events_url'])}?{query}"
    return api.request("DELETE", url, token=created["credentials"]["read_token"])


def flood(api: LambdaClient, created: dict, posts: int) -> list[int]:
    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(lambda n: api.post_inbox(created, {"n": n}), range(posts)))
    assert all(reply.error_code == "quota_exceeded" for reply in replies if reply.status == 409)
    return [reply.status for reply in replies]


def test_concurrent_outsiders_never_eat_the_owners_reserve(api: LambdaClient):
    created = api.provision()
    statuses = flood(api, created, 60)
    assert statuses.count(202) == OUTSIDER_SLOTS
    assert statuses.count(409) == 60 - OUTSIDER_SLOTS
    refused = api.post_inbox(created, {"late": True})
    assert refused.status == 409
    assert refused.json()["error"]["outsider_max_events"] == OUTSIDER_SLOTS
    # The owner still writes state: the reserve is theirs.
    assert put_state(api, created, "checkpoint", 1) == 201
    assert put_state(api, created, "checkpoint", 2) == 200
    assert delete_state(api, created, "checkpoint") == 200
    page = api.poll(created, limit=1000).json()
    assert len(page["events"]) == OUTSIDER_SLOTS + 3
    assert [event["sequence"] for event in page["events"]] == list(range(1, OUTSIDER_SLOTS + 4))


def test_the_owner_trims_a_flood_and_outsiders_can_post_again(api: LambdaClient):
    created = api.provision()
    flood(api, created, OUTSIDER_SLOTS)
    assert api.post_inbox(created, {"late": True}).status == 409

    kept = trim(api, created, 20)
    assert kept.status == 200, kept.text
    assert kept.json() == {"trimmed": 0, "trimmed_through": 0}, "nothing acknowledged: nothing trimmed"
    trimmed = trim(api, created, 20, include_unacknowledged="true")
    assert trimmed.json() == {"trimmed": 20, "trimmed_through": 20}
    assert trim(api, created, 20, include_unacknowledged="true").json() == {"trimmed": 0, "trimmed_through": 20}

    posted = api.post_inbox(created, {"after": "trim"})
    assert posted.status == 202
    assert posted.json()["event"]["sequence"] == OUTSIDER_SLOTS + 1, "sequences are never reused"

    behind = api.poll(created, after=3, limit=5).json()
    assert behind["trimmed_through"] == 20
    assert [event["sequence"] for event in behind["events"]] == [21, 22, 23, 24, 25]
    ahead = api.poll(created, after=30, limit=1000).json()
    assert ahead["trimmed_through"] == 20
    assert [event["sequence"] for event in ahead["events"]] == list(range(31, OUTSIDER_SLOTS + 2))


def test_a_trim_of_acknowledged_events_stops_at_the_first_unacknowledged(api: LambdaClient):
    created = api.provision()
    for n in range(6):
        api.post_inbox(created, {"n": n})
    events = api.poll(created).json()["events"]
    token = created["credentials"]["read_token"]
    events_url = path_of(created["endpoints"]["events_url"])
    for event in (events[0], events[1], events[3]):
        assert api.request("POST", f"{events_url}/{event['id']}/ack", token=token).status == 200
    assert trim(api, created, 5).json() == {"trimmed": 2, "trimmed_through": 2}
    page = api.poll(created).json()
    assert [event["sequence"] for event in page["events"]] == [3, 4, 5, 6]
    assert page["trimmed_through"] == 2
    empty = api.poll(created, after=0, limit=1).json()
    assert empty["events"][0]["sequence"] == 3


def test_trim_needs_the_read_token_and_a_sequence(api: LambdaClient):
    created = api.provision()
    api.post_inbox(created, {"n": 1})
    url = f"{path_of(created['endpoints']['events_url'])}?through=1&include_unacknowledged=true"
    assert api.request("DELETE", url).status == 401
    assert api.request("DELETE", url, token="wrong").status == 401
    missing = api.request(
        "DELETE", path_of(created["endpoints"]["events_url"]), token=created["credentials"]["read_token"]
    )
    assert missing.status == 422
    assert [event["sequence"] for event in api.poll(created).json()["events"]] == [1]


def test_trimming_past_the_head_trims_only_what_exists(api: LambdaClient):
    created = api.provision()
    api.post_inbox(created, {"n": 1})
    assert trim(api, created, 999, include_unacknowledged="true").json() == {"trimmed": 1, "trimmed_through": 1}
    assert api.post_inbox(created, {"n": 2}).json()["event"]["sequence"] == 2
    assert [event["sequence"] for event in api.poll(created).json()["events"]] == [2]


def test_a_trim_removes_the_pieces_of_large_events(api: LambdaClient, dynamodb_local, local_table):
    created = api.provision()
    big = api.post_inbox(created, {"data": {"text": "x" * 900_000}})
    assert big.status == 202
    api.post_inbox(created, {"n": 2})
    assert trim(api, created, 1, include_unacknowledged="true").json() == {"trimmed": 1, "trimmed_through": 1}
    client = boto3.client("dynamodb", endpoint_url=dynamodb_local.endpoint, region_name="us-east-1")
    pk = "A#" + created["address"]["id"]
    items = client.query(
        TableName=local_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": pk}},
        ProjectionExpression="sk",
    )["Items"]
    assert not [item["sk"]["S"] for item in items if item["sk"]["S"].startswith(("C#", "E#000000000001"))]
    assert [event["sequence"] for event in api.poll(created).json()["events"]] == [2]
