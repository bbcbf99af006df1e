"""Inbox verifiers on DynamoDB Local, registered while posts race in."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from tests.integration.test_feed_concurrency import all_events
from tests.support.lambda_client import LambdaClient, path_of


def test_no_unsigned_post_that_starts_after_a_verifier_is_registered_commits(local_api: LambdaClient):
    """Posters in several threads (and a second process's worth of state) race a registration; none slips past it."""
    created = local_api.provision()
    inbox = path_of(created["endpoints"]["inbox_url"])
    address = path_of(created["endpoints"]["address_url"])
    token = created["credentials"]["read_token"]
    registered_at: list[float] = []
    stop = threading.Event()

    def post_until_stopped(_: int) -> list[tuple[float, int]]:
        seen = []
        while not stop.is_set():
            started = time.monotonic()
            reply = local_api.request(
                "POST", inbox, body=b'{"unsigned": true}', headers={"Content-Type": "application/json"}
            )
            seen.append((started, reply.status))
        return seen

    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = [pool.submit(post_until_stopped, n) for n in range(6)]
        time.sleep(0.5)
        put = local_api.request("PUT", f"{address}/inbox/verifiers/github", json_body={"secret": "gh"}, token=token)
        assert put.status == 201
        registered_at.append(time.monotonic())
        time.sleep(0.5)
        stop.set()
        results = [item for future in futures for item in future.result()]
    after = [status for started, status in results if started > registered_at[0]]
    assert after and set(after) == {401}, "every post begun after the registration is refused"
    accepted = sum(status == 202 for _, status in results)
    assert accepted > 0 and set(status for _, status in results) <= {202, 401}
    assert len(all_events(local_api, created)) == accepted, "exactly the accepted posts were appended"
