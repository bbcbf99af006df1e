"""The feed on DynamoDB Local: real transactions, real races."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import boto3

from tests.support.lambda_client import LambdaClient, make_services


def all_events(api: LambdaClient, created: dict) -> list[dict]:
    events, after = [], 0
    while True:
        page = api.poll(created, after=after, limit=1000).json()
        events += page["events"]
        after = page["next_cursor"]
        if not page["has_more"]:
            return events


def test_concurrent_posts_with_one_idempotency_key_make_one_event(local_api: LambdaClient):
    created = local_api.provision()
    body = {"type": "payment.settled", "data": {"amount": 42}}
    with ThreadPoolExecutor(max_workers=20) as pool:
        replies = list(pool.map(lambda _: local_api.post_inbox(created, body, key="pay-1"), range(20)))
    assert sorted(reply.status for reply in replies) == [200] * 19 + [202]
    assert len({reply.json()["event"]["id"] for reply in replies}) == 1
    assert len(all_events(local_api, created)) == 1


def test_concurrent_posters_get_gap_free_sequences_and_lose_nothing(local_api: LambdaClient):
    created = local_api.provision()

    def post_all(writer: int) -> list[int]:
        return [sequence_of(local_api.post_inbox(created, {"data": {"writer": writer, "n": n}})) for n in range(50)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        acknowledged = [seq for seqs in pool.map(post_all, range(8)) for seq in seqs]
    assert sorted(acknowledged) == list(range(1, 401))
    events = all_events(local_api, created)
    assert [event["sequence"] for event in events] == list(range(1, 401))
    stored = {(event["data"]["writer"], event["data"]["n"]) for event in events}
    assert stored == {(writer, n) for writer in range(8) for n in range(50)}


def test_writers_in_separate_processes_share_one_sequence(dynamodb_local, local_table, clock):
    """Two service instances (two Lambda containers) with stale sequence hints."""
    first = LambdaClient(make_services(table_name=local_table, dynamodb_endpoint=dynamodb_local.endpoint, clock=clock))
    second = LambdaClient(make_services(table_name=local_table, dynamodb_endpoint=dynamodb_local.endpoint, clock=clock))
    created = first.provision()
    for n in range(6):
        writer = first if n % 2 else second
        assert writer.post_inbox(created, {"n": n}).json()["event"]["sequence"] == n + 1
    assert [event["data"]["n"] for event in all_events(first, created)] == list(range(6))


def test_quota_holds_under_concurrent_posts(dynamodb_local, local_table, clock):
    api = LambdaClient(
        make_services(
            table_name=local_table,
            dynamodb_endpoint=dynamodb_local.endpoint,
            clock=clock,
            max_events=10,
            owner_reserved_events=0,
        )
    )
    created = api.provision()
    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(lambda n: api.post_inbox(created, {"n": n}), range(30)))
    statuses = [reply.status for reply in replies]
    assert statuses.count(202) == 10
    assert statuses.count(409) == 20
    assert all(reply.error_code == "quota_exceeded" for reply in replies if reply.status == 409)
    assert len(all_events(api, created)) == 10


def test_a_megabyte_body_round_trips_byte_for_byte(local_api: LambdaClient):
    created = local_api.provision()
    text = "".join(chr(0x4E00 + (n % 5000)) for n in range(333_000))  # ~1 MB of 3-byte characters
    body = json.dumps({"data": text}, ensure_ascii=False)
    assert len(body.encode()) <= 1_000_000
    assert local_api.request("POST", created["endpoints"]["inbox_url"].split("cairn.test")[1], body=body).status == 202
    assert all_events(local_api, created)[0]["data"] == text


def test_delete_sweeps_every_item_of_the_address(local_api: LambdaClient, dynamodb_local, local_table):
    created = local_api.provision()
    for n in range(30):
        local_api.post_inbox(created, {"n": n}, key=f"k{n}")
    token = created["credentials"]["read_token"]
    address_path = created["endpoints"]["address_url"].split("cairn.test")[1]
    assert local_api.request("DELETE", address_path, token=token).status == 200
    client = boto3.client(
        "dynamodb",
        endpoint_url=dynamodb_local.endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    remaining = client.query(
        TableName=local_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"A#{created['address']['id']}"}},
    )["Items"]
    assert remaining == []


def test_concurrent_requests_keep_their_own_request_state(local_api: LambdaClient):
    """One resolver instance serves many threads, as under `cairn serve`."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        created = list(pool.map(lambda n: local_api.provision(task_id=f"task-{n}"), range(64)))
    assert [reply["address"]["task_id"] for reply in created] == [f"task-{n}" for n in range(64)]


def sequence_of(reply) -> int:
    assert reply.status == 202, reply.text
    return reply.json()["event"]["sequence"]
