"""The use cases of one process, wired to one DynamoDB client.

Built once per Lambda container (at import) or per `cairn serve` process;
the HTTP routes receive it and never build storage themselves. The use cases
of an inbox post and a poll are built at once; the others (provisioning,
inbox settings, email in and out, wake-ups, runtime, memory, checkpoints,
the LangGraph store and agent sessions), with the modules they need, when
first asked for, so a container that only takes inbox posts and polls never
loads them. `Services.in_memory` wires the address use cases to the
in-memory ports instead, for tests.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

import msgspec

from cairn.addresses.feed import Feed
from cairn.addresses.inbox import Inbox
from cairn.addresses.ports import AddressStore, RateLimiter, ReadLeases, StateStore, Waiter
from cairn.addresses.state import AddressState
from cairn.clock import Clock, system_clock
from cairn.dynamodb.address_table import AddressTable
from cairn.dynamodb.client import LazyClient
from cairn.dynamodb.ratelimit import RateLimiter as DynamoRateLimiter
from cairn.dynamodb.read_leases import ReadLeases as DynamoReadLeases
from cairn.dynamodb.state_table import StateTable
from cairn.dynamodb.waiters import PollingWaiter
from cairn.server_secret import ServerSecret
from cairn.settings import Settings

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

    from cairn.addresses.inbox_config import InboxConfiguration
    from cairn.addresses.provisioning import Provisioning
    from cairn.agent_sessions.conversations import AgentSessions
    from cairn.agent_sessions.strands import StrandsSessions
    from cairn.checkpoints.models import Owner
    from cairn.checkpoints.threads import Checkpoints
    from cairn.dynamodb.contact_table import ContactTable
    from cairn.dynamodb.graph_store_table import GraphStoreTable
    from cairn.dynamodb.subscription_table import SubscriptionTable
    from cairn.email.attachments import EmailAttachments
    from cairn.email.contacts import Contacts
    from cairn.email.ingest import EmailIngest
    from cairn.email.outbound_ports import OutboundMailer
    from cairn.email.outcome_sweep import OutcomeSweep
    from cairn.email.ports import RawMessageStore
    from cairn.email.retention import MailRetention
    from cairn.email.sending import Sending
    from cairn.files.files import Files
    from cairn.graphstore.batches import GraphStore
    from cairn.runtime.store import RuntimeStore
    from cairn.transcript.memory import MemoryStore
    from cairn.wakeups.dispatcher import Dispatcher, Sweep
    from cairn.wakeups.sender import Sender
    from cairn.wakeups.subscriptions import Subscriptions
    from cairn.wakeups.transports import Transport


# `dict=True`: each `cached_property` keeps the use case it built in the instance's `__dict__`.
class Services(msgspec.Struct, frozen=True, dict=True):
    settings: Settings
    inbox: Inbox
    feed: Feed
    state: AddressState
    # What the use cases built on first use are made of.
    client: Any
    table: AddressStore
    limiter: RateLimiter
    state_table: StateStore
    waiter: Waiter
    clock: Clock
    # Read on first use: by provisioning under a key, and by inbox verifiers.
    server_secret: ServerSecret
    # Given to `build` (tests, `cairn serve`); else chosen from the settings on first use.
    given_mailer: OutboundMailer | None = None
    given_wake_transport: Transport | None = None
    given_runtime: RuntimeStore | None = None
    # Told the time of each wake-up retry scheduled (`cairn serve`'s retry sweep runs then).
    retry_scheduled: Callable[[float], None] | None = None

    @cached_property
    def provisioning(self) -> Provisioning:
        from cairn.addresses.provisioning import Provisioning

        return Provisioning(
            self.table,
            self.state_table,
            self.feed,
            self.settings,
            self.clock,
            server_secret=self.server_secret,
            # Read on the first deletion: the raw-message store loads its storage client then.
            before_delete=lambda address_id: self.mail_retention.forget_address(address_id),
        )

    @cached_property
    def inbox_config(self) -> InboxConfiguration:
        from cairn.addresses.inbox_config import InboxConfiguration

        return InboxConfiguration(self.table, self.clock, self.server_secret)

    @cached_property
    def raw_messages(self) -> RawMessageStore:
        from cairn.dynamodb.raw_messages import raw_message_store

        return raw_message_store(self.settings)

    @cached_property
    def mail_retention(self) -> MailRetention:
        from cairn.email.retention import MailRetention

        return MailRetention(self.table, self.raw_messages, self.settings, self.clock)

    @cached_property
    def email(self) -> EmailIngest:
        from cairn.email.ingest import EmailIngest

        return EmailIngest(self.table, self.raw_messages, self.limiter, self.waiter, self.settings, self.clock)

    @cached_property
    def attachments(self) -> EmailAttachments:
        from cairn.email.attachments import EmailAttachments

        return EmailAttachments(self.table, self.raw_messages, self.feed, self.settings, self.clock)

    @property
    def outbound_configured(self) -> bool:
        """Whether this process can send mail, without loading the mailer."""
        return self.given_mailer is not None or self.settings.outbound == "ses"

    @cached_property
    def mailer(self) -> OutboundMailer | None:
        """What carries outbound mail: the one given to `build`, else `settings.outbound` (SES, or none)."""
        if self.given_mailer is not None or self.settings.outbound != "ses":
            return self.given_mailer
        # Loaded only where SES sends: its client costs import time every other function would pay.
        from cairn.email.ses_mailer import SesMailer

        return SesMailer.for_region(self.settings.region, self.settings.ses_configuration_set)

    @cached_property
    def _contact_table(self) -> ContactTable:
        from cairn.dynamodb.contact_table import ContactTable

        return ContactTable(self.client, self.settings.table_name)

    @cached_property
    def contacts(self) -> Contacts:
        from cairn.email.contacts import Contacts

        return Contacts(self.table, self._contact_table, self.mailer, self.settings, self.clock)

    @cached_property
    def sending(self) -> Sending:
        from cairn.dynamodb.send_ledger import SendLedger
        from cairn.email.sending import Sending

        ledger = SendLedger(self.client, self.settings.table_name)
        return Sending(self.table, self._contact_table, ledger, self.mailer, self.waiter, self.settings, self.clock)

    @cached_property
    def outcome_sweep(self) -> OutcomeSweep:
        from cairn.dynamodb.outcome_deadlines import OutcomeDeadlineTable
        from cairn.email.outcome_sweep import OutcomeSweep

        return OutcomeSweep(OutcomeDeadlineTable(self.client, self.settings.table_name), self.sending, self.clock)

    @cached_property
    def runtime(self) -> RuntimeStore:
        if self.given_runtime is not None:
            return self.given_runtime
        from cairn.dynamodb.runtime_store import DynamoRuntimeStore

        return DynamoRuntimeStore(self.client, self.settings.table_name)

    @cached_property
    def memory(self) -> MemoryStore:
        from cairn.dynamodb.memory_table import MemoryTable
        from cairn.transcript.memory import MemoryStore

        return MemoryStore(MemoryTable(self.client, self.settings.table_name), self.clock)

    @cached_property
    def checkpoints(self) -> Checkpoints:
        from cairn.checkpoints.threads import Checkpoints
        from cairn.dynamodb.checkpoint_table import CheckpointTable

        store = CheckpointTable(
            self.client, self.settings.table_name, max_bytes=self.settings.storage_max_bytes, reclaim=self._reclaim
        )
        return Checkpoints(self.table, store, self.clock)

    @cached_property
    def agent_sessions(self) -> AgentSessions:
        from cairn.agent_sessions.conversations import AgentSessions
        from cairn.dynamodb.agent_session_table import AgentSessionTable

        store = AgentSessionTable(self.client, self.settings.table_name, reclaim=self._reclaim)
        return AgentSessions(self.table, store, self.clock, max_bytes=self.settings.storage_max_bytes)

    @cached_property
    def strands_sessions(self) -> StrandsSessions:
        from cairn.agent_sessions.strands import StrandsSessions
        from cairn.dynamodb.strands_session_table import StrandsSessionTable

        store = StrandsSessionTable(
            self.client, self.settings.table_name, max_bytes=self.settings.storage_max_bytes, reclaim=self._reclaim
        )
        return StrandsSessions(self.table, store, self.clock)

    @cached_property
    def graph_store(self) -> GraphStore:
        from cairn.graphstore.batches import GraphStore

        return GraphStore(self.table, self._graph_store_table, self.clock)

    @cached_property
    def _graph_store_table(self) -> GraphStoreTable:
        from cairn.dynamodb.graph_store_table import GraphStoreTable

        return GraphStoreTable(self.client, self.settings.table_name, max_bytes=self.settings.storage_max_bytes)

    def _reclaim(self, owner: Owner, now: float) -> bool:
        """Room given back to a full address: its store items whose TTL passed, which every writer's bytes share."""
        return self._graph_store_table.remove_ended(owner, now)

    @cached_property
    def files(self) -> Files:
        from cairn.dynamodb.file_table import FileTable
        from cairn.files.files import Files

        store = FileTable(self.client, self.settings.table_name, reclaim=self._reclaim)
        return Files(self.table, store, self.clock, max_bytes=self.settings.storage_max_bytes)

    @cached_property
    def _subscription_table(self) -> SubscriptionTable:
        from cairn.dynamodb.subscription_table import SubscriptionTable

        return SubscriptionTable(self.client, self.settings.table_name, scheduled=self.retry_scheduled)

    @cached_property
    def _wake_transport(self) -> Transport:
        if self.given_wake_transport is not None:
            return self.given_wake_transport
        from cairn.wakeups.aws_targets import AwsTargets
        from cairn.wakeups.targets import deployment_origins
        from cairn.wakeups.transports import Transports
        from cairn.wakeups.webhook import WebhookTransport

        settings = self.settings
        webhook = WebhookTransport(
            timeout=settings.webhook_timeout_seconds,
            allow_local=settings.webhook_allow_local,
            own_origins=deployment_origins(settings),
            server_secret=self.server_secret,
        )
        return Transports(webhook, AwsTargets(lambda service: _aws_client(settings, service)))

    @cached_property
    def _sender(self) -> Sender:
        from cairn.wakeups.sender import Sender

        return Sender(
            self._subscription_table, self.table, self._wake_transport, self.waiter, self.settings, self.clock
        )

    @cached_property
    def subscriptions(self) -> Subscriptions:
        from cairn.wakeups.subscriptions import Subscriptions

        return Subscriptions(
            self.table,
            self._subscription_table,
            self._wake_transport,
            self.limiter,
            self.settings,
            self.clock,
            self.server_secret,
        )

    @cached_property
    def dispatcher(self) -> Dispatcher:
        from cairn.wakeups.dispatcher import Dispatcher

        return Dispatcher(self._subscription_table, self._sender, self.clock)

    @cached_property
    def sweep(self) -> Sweep:
        from cairn.wakeups.dispatcher import Sweep

        return Sweep(self._subscription_table, self._sender, self.clock)

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        client: DynamoDBClient | None = None,
        waiter: Waiter | None = None,
        clock: Clock = system_clock,
        mailer: OutboundMailer | None = None,
        wake_transport: Transport | None = None,
        runtime: RuntimeStore | None = None,
        retry_scheduled: Callable[[float], None] | None = None,
    ) -> Services:
        """`mailer` carries outbound mail; without one, `settings.outbound` chooses (SES, or none).

        `runtime` serves the runtime routes from another engine (the in-memory
        one, say); without one they use this table. `retry_scheduled(at)` is
        told of each wake-up retry once it is stored.
        """
        # A LazyClient answers every client call by forwarding it to the client it makes on first use.
        client = client or cast("DynamoDBClient", LazyClient(settings))
        waiter = waiter or PollingWaiter()
        table = AddressTable(
            client,
            settings.table_name,
            retention_seconds=settings.event_retention_seconds,
            max_events=settings.max_events,
            owner_reserve=settings.owner_reserved_events,
        )
        return cls._wired(
            settings,
            client=client,
            table=table,
            state_table=StateTable(client, settings.table_name),
            limiter=DynamoRateLimiter(client, settings.table_name),
            leases=DynamoReadLeases(client, settings.table_name),
            waiter=waiter,
            clock=clock,
            mailer=mailer,
            wake_transport=wake_transport,
            runtime=runtime,
            retry_scheduled=retry_scheduled,
        )

    @classmethod
    def in_memory(
        cls,
        settings: Settings,
        *,
        waiter: Waiter | None = None,
        clock: Clock = system_clock,
        runtime: RuntimeStore | None = None,
    ) -> Services:
        """The address use cases on the in-memory ports (`cairn.addresses.inmem`), for tests.

        What stores elsewhere in the table (mail out, contacts, wake-ups,
        checkpoints, sessions, memory, files) has no in-memory form: it has no
        client here, and its first call says so.
        """
        from cairn.addresses import inmem
        from cairn.dynamodb.waiters import NotifyingWaiter

        memory = inmem.AddressMemory()
        table = inmem.InMemoryAddressStore(
            memory,
            retention_seconds=settings.event_retention_seconds,
            max_events=settings.max_events,
            owner_reserve=settings.owner_reserved_events,
        )
        return cls._wired(
            settings,
            client=_NoClient(),
            table=table,
            state_table=inmem.InMemoryStateStore(memory),
            limiter=inmem.InMemoryRateLimiter(memory),
            leases=inmem.InMemoryReadLeases(memory),
            waiter=waiter or NotifyingWaiter(),
            clock=clock,
            mailer=None,
            wake_transport=None,
            runtime=runtime,
        )

    @classmethod
    def _wired(
        cls,
        settings: Settings,
        *,
        client: Any,
        table: AddressStore,
        state_table: StateStore,
        limiter: RateLimiter,
        leases: ReadLeases,
        waiter: Waiter,
        clock: Clock,
        mailer: OutboundMailer | None,
        wake_transport: Transport | None,
        runtime: RuntimeStore | None,
        retry_scheduled: Callable[[float], None] | None = None,
    ) -> Services:
        server_secret = ServerSecret.from_settings(settings)
        return cls(
            settings=settings,
            inbox=Inbox(table, waiter, settings, clock, server_secret),
            feed=Feed(table, leases, waiter, settings, clock),
            state=AddressState(table, state_table, waiter, settings, clock),
            client=client,
            table=table,
            limiter=limiter,
            state_table=state_table,
            waiter=waiter,
            clock=clock,
            server_secret=server_secret,
            given_mailer=mailer,
            given_wake_transport=wake_transport,
            given_runtime=runtime,
            retry_scheduled=retry_scheduled,
        )


class _NoClient:
    """The client of in-memory services: the stores that would need one have no in-memory form."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"in-memory services have no DynamoDB client (asked for {name})")


def _aws_client(settings: Settings, service: str) -> Any:
    """A client for a wake-up target's service (made on first delivery to one).

    One try a call, and short timeouts: the sender retries with its own back-off, and each
    attempt must end well inside its lease. botocore's defaults (three tries of up to 60 s each)
    took three minutes against a target that never answered, and a retry after a lost answer
    found a durable callback already completed by the first try.
    """
    from botocore.config import Config

    from cairn import aws

    config = Config(retries={"total_max_attempts": 1}, connect_timeout=3, read_timeout=10)
    return aws.client(service, settings.region, config)
