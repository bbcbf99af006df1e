"""The HTTP requests an agent makes, on one keep-alive httpx client."""

from __future__ import annotations

import itertools

import httpx

from bench.address import PROVISION_PATH, Address, inbox_body

# Unique idempotency keys across every client thread (`next` on a count is atomic).
_numbers = itertools.count(1)


def provision(client: httpx.Client) -> Address:
    reply = client.post(PROVISION_PATH, json={"task_id": "bench"})
    reply.raise_for_status()
    return Address.from_provisioned(reply.json())


def post(client: httpx.Client, address: Address) -> httpx.Response:
    """A new callback with its own Idempotency-Key, as a retrying sender would send it."""
    number = next(_numbers)
    return client.post(address.inbox_path, json=inbox_body(number), headers={"Idempotency-Key": f"bench:{number}"})


def poll(client: httpx.Client, address: Address, *, after: int, wait: float) -> httpx.Response:
    return client.get(address.events_path, params={"after": after, "wait": wait}, headers=address.auth)
