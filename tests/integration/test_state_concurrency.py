"""State on DynamoDB Local: compare-and-set under real concurrency."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.support.lambda_client import LambdaClient, path_of


def state_path(created: dict, key: str = "") -> str:
    root = path_of(created["endpoints"]["state_url"])
    return f"{root}/{key}" if key else root


def read_revision(api: LambdaClient, created: dict, key: str) -> tuple[int, object]:
    reply = api.request("GET", state_path(created, key), token=created["credentials"]["read_token"])
    if reply.status == 404:
        return 0, None
    body = reply.json()
    return body["revision"], body["value"]


def cas_put(api: LambdaClient, created: dict, key: str, value, revision: int):
    return api.request(
        "PUT",
        state_path(created, key),
        json_body={"value": value, "if_revision": revision},
        token=created["credentials"]["read_token"],
    )


def all_events(api: LambdaClient, created: dict) -> list[dict]:
    return api.poll(created, limit=1000).json()["events"]


WRITERS = 8
INCREMENTS_EACH = 15


def test_concurrent_increments_with_retry_on_conflict_lose_nothing(local_api: LambdaClient):
    created = local_api.provision()
    assert cas_put(local_api, created, "counter", 0, 0).status == 201
    conflicts = []

    def increment_many(_: int) -> None:
        for _ in range(INCREMENTS_EACH):
            while True:
                revision, value = read_revision(local_api, created, "counter")
                reply = cas_put(local_api, created, "counter", value + 1, revision)
                if reply.status == 200:
                    break
                assert reply.status == 409 and reply.error_code == "revision_conflict", reply.text
                conflicts.append(1)

    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        list(pool.map(increment_many, range(WRITERS)))
    total = WRITERS * INCREMENTS_EACH
    revision, value = read_revision(local_api, created, "counter")
    assert value == total
    assert revision == total + 1
    events = all_events(local_api, created)
    assert [e["sequence"] for e in events] == list(range(1, total + 2))
    assert [e["data"]["revision"] for e in events] == list(range(1, total + 2))
    assert conflicts, "eight writers on one key should have collided at least once"


def test_writers_of_different_keys_never_conflict(local_api: LambdaClient):
    created = local_api.provision()

    def write_own_key(writer: int) -> list[int]:
        statuses = []
        revision = 0
        for n in range(25):
            reply = cas_put(local_api, created, f"worker-{writer}", n, revision)
            statuses.append(reply.status)
            revision = reply.json().get("revision", revision)
        return statuses

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = [status for result in pool.map(write_own_key, range(8)) for status in result]
    assert 409 not in statuses
    assert statuses.count(201) == 8 and statuses.count(200) == 8 * 24
    assert len(all_events(local_api, created)) == 200


def test_the_key_limit_holds_under_concurrent_creates(local_api: LambdaClient):
    created = local_api.provision()

    def create(n: int) -> int:
        return cas_put(local_api, created, f"k{n}", n, 0).status

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(create, range(48)))
    assert statuses.count(201) == 32
    assert statuses.count(409) == 16
    listing = local_api.request("GET", state_path(created), token=created["credentials"]["read_token"]).json()
    assert len(listing["keys"]) == 32
    assert listing["usage"]["keys"] == 32
    assert listing["usage"]["bytes"] == sum(k["size"] for k in listing["keys"])


def test_a_stale_batch_changes_nothing_on_dynamodb_local(local_api: LambdaClient):
    created = local_api.provision()
    token = created["credentials"]["read_token"]
    cas_put(local_api, created, "a", 1, 0)
    reply = local_api.request(
        "POST",
        state_path(created),
        json_body={
            "operations": [
                {"key": "a", "op": "set", "value": 2, "if_revision": 1},
                {"key": "b", "op": "set", "value": 2},
                {"key": "c", "op": "delete", "if_revision": 4},
            ]
        },
        token=token,
    )
    assert reply.status == 409
    assert [c["key"] for c in reply.json()["error"]["conflicts"]] == ["c"]
    assert read_revision(local_api, created, "a") == (1, 1)
    assert read_revision(local_api, created, "b") == (0, None)
    assert len(all_events(local_api, created)) == 1
