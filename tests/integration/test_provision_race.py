"""Provisioning retries racing under one `Idempotency-Key` on DynamoDB Local: one address, whoever wins."""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor

from tests.support.lambda_client import LambdaClient

RACERS = 8


def test_racing_retries_of_one_key_make_one_address(local_api: LambdaClient):
    key = secrets.token_urlsafe(32)

    def provision(_: int):
        for _attempt in range(20):
            reply = local_api.request(
                "POST", "/api/v1/addresses", json_body={"task_id": "race"}, headers={"Idempotency-Key": key}
            )
            # A retry that met the winner's transaction in flight is told to come back (503), as any client would.
            if reply.status != 503:
                return reply
        raise AssertionError("busy twenty times in a row")

    with ThreadPoolExecutor(RACERS) as pool:
        replies = list(pool.map(provision, range(RACERS)))

    assert {reply.status for reply in replies} == {201}
    assert len({reply.text for reply in replies}) == 1
    assert sum(reply.headers.get("Idempotent-Replayed") == "true" for reply in replies) == RACERS - 1
    created = replies[0].json()
    assert local_api.poll(created).status == 200
