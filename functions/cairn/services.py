"""The use cases of one process, wired to one DynamoDB client.

Built once per Lambda container (at import) or per `cairn serve` process;
the HTTP routes receive it and never build storage themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from cairn.addresses.feed import Feed
from cairn.addresses.inbox import Inbox
from cairn.addresses.provisioning import Provisioning
from cairn.addresses.state import AddressState
from cairn.clock import Clock, system_clock
from cairn.settings import Settings
from cairn.store.address_table import AddressTable
from cairn.store.client import make_client
from cairn.store.ratelimit import RateLimiter
from cairn.store.state_table import StateTable
from cairn.store.waiters import PollingWaiter, Waiter


@dataclass(frozen=True)
class Services:
    settings: Settings
    provisioning: Provisioning
    inbox: Inbox
    feed: Feed
    state: AddressState

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        client=None,
        waiter: Waiter | None = None,
        clock: Clock = system_clock,
    ) -> Services:
        client = client or make_client(settings)
        waiter = waiter or PollingWaiter()
        table = AddressTable(
            client,
            settings.table_name,
            retention_seconds=settings.event_retention_seconds,
            max_events=settings.max_events,
        )
        limiter = RateLimiter(client, settings.table_name)
        state_table = StateTable(client, settings.table_name)
        return cls(
            settings=settings,
            provisioning=Provisioning(table, state_table, limiter, settings, clock),
            inbox=Inbox(table, waiter, settings, clock),
            feed=Feed(table, limiter, waiter, settings, clock),
            state=AddressState(table, state_table, waiter, settings, clock),
        )
