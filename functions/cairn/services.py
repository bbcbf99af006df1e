"""The use cases of one process, wired to one DynamoDB client.

Built once per Lambda container (at import) or per `cairn serve` process;
the HTTP routes receive it and never build storage themselves. The address
use cases are built at once; email, runtime and memory, with the modules
they need, when first asked for, so a container that only takes inbox posts
and polls never loads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from cairn.addresses.feed import Feed
from cairn.addresses.inbox import Inbox
from cairn.addresses.ports import Waiter
from cairn.addresses.provisioning import Provisioning
from cairn.addresses.state import AddressState
from cairn.clock import Clock, system_clock
from cairn.dynamodb.address_table import AddressTable
from cairn.dynamodb.client import LazyClient
from cairn.dynamodb.ratelimit import RateLimiter
from cairn.dynamodb.state_table import StateTable
from cairn.dynamodb.waiters import PollingWaiter
from cairn.settings import Settings

if TYPE_CHECKING:
    from cairn.email.attachments import EmailAttachments
    from cairn.email.ingest import EmailIngest
    from cairn.email.ports import RawMessageStore
    from cairn.runtime.store import RuntimeStore
    from cairn.transcript.memory import MemoryStore


@dataclass(frozen=True)
class Services:
    settings: Settings
    provisioning: Provisioning
    inbox: Inbox
    feed: Feed
    state: AddressState
    # What the use cases built on first use are made of.
    client: Any
    table: AddressTable
    waiter: Waiter
    clock: Clock

    @cached_property
    def raw_messages(self) -> RawMessageStore:
        from cairn.dynamodb.raw_messages import raw_message_store

        return raw_message_store(self.settings)

    @cached_property
    def email(self) -> EmailIngest:
        from cairn.email.ingest import EmailIngest

        return EmailIngest(self.table, self.raw_messages, self.waiter, self.settings, self.clock)

    @cached_property
    def attachments(self) -> EmailAttachments:
        from cairn.email.attachments import EmailAttachments

        return EmailAttachments(self.table, self.raw_messages, self.feed, self.settings, self.clock)

    @cached_property
    def runtime(self) -> RuntimeStore:
        from cairn.runtime.dynamo import DynamoRuntimeStore

        return DynamoRuntimeStore(self.client, self.settings.table_name)

    @cached_property
    def memory(self) -> MemoryStore:
        from cairn.dynamodb.memory_table import MemoryTable
        from cairn.transcript.memory import MemoryStore

        return MemoryStore(MemoryTable(self.client, self.settings.table_name), self.clock)

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        client=None,
        waiter: Waiter | None = None,
        clock: Clock = system_clock,
    ) -> Services:
        client = client or LazyClient(settings)
        waiter = waiter or PollingWaiter()
        table = AddressTable(
            client,
            settings.table_name,
            retention_seconds=settings.event_retention_seconds,
            max_events=settings.max_events,
        )
        limiter = RateLimiter(client, settings.table_name)
        state_table = StateTable(client, settings.table_name)
        feed = Feed(table, limiter, waiter, settings, clock)
        return cls(
            settings=settings,
            provisioning=Provisioning(table, state_table, limiter, settings, clock),
            inbox=Inbox(table, waiter, settings, clock),
            feed=feed,
            state=AddressState(table, state_table, waiter, settings, clock),
            client=client,
            table=table,
            waiter=waiter,
            clock=clock,
        )
