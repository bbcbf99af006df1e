"""Agent sessions on DynamoDB Local: racing pops and first adds, pieces removed, reads whose cost is flat."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cairn.dynamodb import keys, table_ops
from cairn.dynamodb.agent_session_table import AgentSessionTable
from tests.support.lambda_client import LambdaClient

THREADS = 8


def items_path(created: dict, session_id: str) -> str:
    return f"/api/v1/addresses/{created['address']['id']}/sessions/{session_id}/items"


def call(api: LambdaClient, created: dict, method: str, session_id: str, path: str = "", **parts: Any):
    reply = api.request(
        method, items_path(created, session_id) + path, token=created["credentials"]["read_token"], **parts
    )
    assert reply.status in (200, 201), reply.text
    return reply.json()


def session_keys(api: LambdaClient, created: dict) -> list[str]:
    """Every `sk` of the address's partition that belongs to an agent session (pieces included)."""
    pk = keys.address_pk(created["address"]["id"])
    items = table_ops.query_range(api.services.client, api.services.settings.table_name, pk, ProjectionExpression="sk")
    return [item["sk"]["S"] for item in items if "AGS#" in item["sk"]["S"]]


def test_racing_pops_take_each_item_once(local_api: LambdaClient):
    created = local_api.provision()
    stored = [f"item-{index}" for index in range(40)]
    call(local_api, created, "POST", "race", json_body={"items": [{"content": text} for text in stored]})

    def pop_until_empty(_: int) -> list[str]:
        taken = []
        while (item := call(local_api, created, "POST", "race", "/pop")["item"]) is not None:
            taken.append(item["content"])
        return taken

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        taken = [text for each in pool.map(pop_until_empty, range(THREADS)) for text in each]

    assert [text for text, times in Counter(taken).items() if times > 1] == []
    assert sorted(taken) == sorted(stored)
    assert call(local_api, created, "GET", "race")["items"] == []


def test_racing_pops_each_sent_twice_at_once_under_its_pop_id_take_each_item_once(local_api: LambdaClient):
    """Every pop is sent twice at the same moment (a client's retry racing its own first try): both
    answers are the one item it took, and no item is taken twice or left."""
    created = local_api.provision()
    stored = [f"item-{index}" for index in range(24)]
    call(local_api, created, "POST", "twice", json_body={"items": [{"content": text} for text in stored]})

    def pop(pop_id: str) -> str | None:
        item = call(local_api, created, "POST", "twice", f"/pop?pop_id={pop_id}")["item"]
        return None if item is None else str(item["content"])

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        pop_ids = [f"pop{index}" for index in range(len(stored))]
        answers = list(pool.map(pop, [pop_id for pop_id in pop_ids for _ in range(2)]))

    firsts, seconds = answers[0::2], answers[1::2]
    assert firsts == seconds
    assert sorted(text for text in firsts if text is not None) == sorted(stored)
    assert call(local_api, created, "GET", "twice")["items"] == []


def test_first_adds_racing_on_a_new_session_make_one_session_holding_every_item(local_api: LambdaClient):
    created = local_api.provision()

    def add(worker: int) -> int:
        items = [{"content": f"{worker}-{n}"} for n in range(3)]
        return call(local_api, created, "POST", "fresh", json_body={"items": items})["count"]

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        counts = list(pool.map(add, range(THREADS)))

    assert sorted(counts) == list(range(3, 3 * THREADS + 1, 3))  # each add saw every add before it
    found = [item["content"] for item in call(local_api, created, "GET", "fresh")["items"]]
    assert sorted(found) == sorted(f"{worker}-{n}" for worker in range(THREADS) for n in range(3))
    for start in range(0, len(found), 3):  # each add's items are together and in order
        worker = found[start].split("-")[0]
        assert found[start : start + 3] == [f"{worker}-{n}" for n in range(3)]
    assert keys.agent_session_head_sk("fresh") in session_keys(local_api, created)


def test_pops_and_clears_remove_the_pieces_of_large_items(local_api: LambdaClient):
    created = local_api.provision()
    large = {"content": "x" * 1_000_000}
    call(local_api, created, "POST", "big", json_body={"items": [large, large]})
    assert sum(1 for sk in session_keys(local_api, created) if sk.startswith("C#")) >= 6

    assert call(local_api, created, "POST", "big", "/pop")["item"] == large
    call(local_api, created, "DELETE", "big")

    assert session_keys(local_api, created) == [keys.agent_session_head_sk("big")]


class CountingClient:
    """A DynamoDB client that counts the items its queries read."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.read = 0

    def query(self, **request: Any) -> Any:
        answer = self._client.query(**request)
        self.read += answer["ScannedCount"]
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_reading_the_latest_items_costs_the_same_however_long_the_session(local_api: LambdaClient):
    created = local_api.provision()
    for start in range(0, 600, 60):
        call(local_api, created, "POST", "long", json_body={"items": [{"n": n} for n in range(start, start + 60)]})
    counting = CountingClient(local_api.services.client)
    table = AgentSessionTable(counting, local_api.services.settings.table_name)  # type: ignore[arg-type]

    page = table.page(created["address"]["id"], "long", limit=2, before=None, max_bytes=10**6)

    assert page.items == ['{"n":598}', '{"n":599}'] and page.next == 599  # sequences start at 1
    assert counting.read <= 4  # the head, the page, and one item to know that more remain
