"""The use cases of one process, wired to one DynamoDB client.

Built once per Lambda container (at import) or per `cairn serve` process;
the HTTP routes receive it and never build storage themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3

from cairn.addresses.feed import Feed
from cairn.addresses.inbox import Inbox
from cairn.addresses.inbox_config import InboxConfiguration
from cairn.addresses.ports import Waiter
from cairn.addresses.provisioning import Provisioning
from cairn.addresses.state import AddressState
from cairn.clock import Clock, system_clock
from cairn.dynamodb.address_table import AddressTable
from cairn.dynamodb.client import make_client
from cairn.dynamodb.contact_table import ContactTable
from cairn.dynamodb.memory_table import MemoryTable
from cairn.dynamodb.ratelimit import RateLimiter
from cairn.dynamodb.raw_messages import raw_message_store
from cairn.dynamodb.send_ledger import SendLedger
from cairn.dynamodb.state_table import StateTable
from cairn.dynamodb.subscription_table import SubscriptionTable
from cairn.dynamodb.waiters import PollingWaiter
from cairn.email.attachments import EmailAttachments
from cairn.email.contacts import Contacts
from cairn.email.ingest import EmailIngest
from cairn.email.outbound_ports import OutboundMailer
from cairn.email.retention import MailRetention
from cairn.email.sending import Sending
from cairn.runtime.dynamo import DynamoRuntimeStore
from cairn.runtime.store import RuntimeStore
from cairn.settings import Settings
from cairn.transcript.memory import MemoryStore
from cairn.wakeups.aws_targets import AwsTargets
from cairn.wakeups.dispatcher import Dispatcher, Sweep
from cairn.wakeups.sender import Sender
from cairn.wakeups.subscriptions import Subscriptions
from cairn.wakeups.transports import Transport, Transports
from cairn.wakeups.webhook import WebhookTransport


@dataclass(frozen=True)
class Services:
    settings: Settings
    provisioning: Provisioning
    inbox: Inbox
    inbox_config: InboxConfiguration
    feed: Feed
    state: AddressState
    email: EmailIngest
    attachments: EmailAttachments
    contacts: Contacts
    sending: Sending
    runtime: RuntimeStore
    memory: MemoryStore
    subscriptions: Subscriptions
    dispatcher: Dispatcher
    sweep: Sweep

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        client=None,
        waiter: Waiter | None = None,
        clock: Clock = system_clock,
        mailer: OutboundMailer | None = None,
        wake_transport: Transport | None = None,
    ) -> Services:
        """`mailer` carries outbound mail; without one, `settings.outbound` chooses (SES, or none)."""
        client = client or make_client(settings)
        waiter = waiter or PollingWaiter()
        table = AddressTable(
            client,
            settings.table_name,
            retention_seconds=settings.event_retention_seconds,
            max_events=settings.max_events,
            owner_reserve=settings.owner_reserved_events,
        )
        limiter = RateLimiter(client, settings.table_name)
        state_table = StateTable(client, settings.table_name)
        feed = Feed(table, limiter, waiter, settings, clock)
        raw_messages = raw_message_store(settings)
        mailer = mailer or _configured_mailer(settings)
        contacts = ContactTable(client, settings.table_name)
        mail_retention = MailRetention(table, raw_messages, settings, clock)
        subscription_table = SubscriptionTable(client, settings.table_name)
        transports = wake_transport or Transports(
            WebhookTransport(timeout=settings.webhook_timeout_seconds, allow_local=settings.webhook_allow_local),
            AwsTargets(lambda service: _aws_client(settings, service)),
        )
        sender = Sender(subscription_table, table, transports, waiter, settings, clock)
        return cls(
            settings=settings,
            provisioning=Provisioning(
                table, state_table, limiter, settings, clock, before_delete=mail_retention.forget_address
            ),
            inbox=Inbox(table, waiter, settings, clock),
            inbox_config=InboxConfiguration(table, clock),
            feed=feed,
            state=AddressState(table, state_table, waiter, settings, clock),
            email=EmailIngest(table, raw_messages, limiter, waiter, settings, clock),
            attachments=EmailAttachments(table, raw_messages, feed, settings, clock),
            contacts=Contacts(table, contacts, limiter, mailer, settings, clock),
            sending=Sending(
                table, contacts, SendLedger(client, settings.table_name), mailer, waiter, settings, clock
            ),
            runtime=DynamoRuntimeStore(client, settings.table_name),
            memory=MemoryStore(MemoryTable(client, settings.table_name), clock),
            subscriptions=Subscriptions(table, subscription_table, transports, settings, clock),
            dispatcher=Dispatcher(subscription_table, sender),
            sweep=Sweep(subscription_table, sender, clock),
        )


def _configured_mailer(settings: Settings) -> OutboundMailer | None:
    if settings.outbound != "ses":
        return None
    # Loaded only where SES sends: its client costs import time every other function would pay.
    from cairn.email.ses_mailer import SesMailer

    return SesMailer.for_region(settings.region, settings.ses_configuration_set)


def _aws_client(settings: Settings, service: str) -> Any:
    """A client for a wake-up target's service (made on first delivery to one)."""
    return boto3.session.Session().client(service, region_name=settings.region)  # type: ignore[call-overload]
