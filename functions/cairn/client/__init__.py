"""Python SDK for Cairn addresses.

    addr = Address.provision("http://127.0.0.1:8787", task_id="nightly", expires_in=86400)
    addr.save("address.json")                         # owner-only; the read token is inside
    addr = Address.restore("address.json")            # in any later process
    addr.state.update("progress", lambda p: {**(p or {}), "step": 2})
    addr.email.send("ada@example.org", "Done.", subject="Report", idempotency_key="report-1")
    for event in addr.events.follow(cursor_file="cursor"):
        handle(event)                                 # acknowledged once this returns

Wake-ups: `addr.subscriptions.create({"kind": "webhook", "url": ...})` pushes new
events to a webhook; its receiver checks them with `webhooks.verify(headers, body, secret)`.

Errors are the server's own classes, rebuilt from its error body, so each
carries its `code` and HTTP `status`; `ConnectionFailed` means no answer, and
`UnexpectedAnswer` one no Cairn server gives (an event without a feed position).
"""

from cairn.client import webhooks
from cairn.client.address import Address
from cairn.client.cursor import CursorFile
from cairn.client.errors import ConnectionFailed, UnexpectedAnswer
from cairn.client.http import HttpClient, RetryPolicy
from cairn.client.inbox import Inbox
from cairn.client.private import UnsafeFile
from cairn.errors import (
    AttachmentUnavailable,
    CairnError,
    CodeExpired,
    ContactLimitReached,
    HeaderInjection,
    IdempotencyKeyReused,
    InvalidJson,
    InvalidReplyTo,
    InvalidRequest,
    MailRefused,
    NotFound,
    OutboundNotConfigured,
    PayloadTooLarge,
    PlainTextOnly,
    QuotaExceeded,
    RateLimited,
    RecipientNotVerified,
    RevisionConflict,
    SignatureInvalid,
    StateLimitExceeded,
    StreamUnavailable,
    SubscriptionLimitExceeded,
    SubscriptionNotFound,
    TargetRefused,
    TooManyAttempts,
    TooManyRecipients,
    Unauthorized,
    Unavailable,
    UnknownRecipient,
    WrongCode,
)

__all__ = [
    "Address",
    "AttachmentUnavailable",
    "CairnError",
    "CodeExpired",
    "ConnectionFailed",
    "ContactLimitReached",
    "CursorFile",
    "HeaderInjection",
    "HttpClient",
    "IdempotencyKeyReused",
    "Inbox",
    "InvalidJson",
    "InvalidReplyTo",
    "InvalidRequest",
    "NotFound",
    "OutboundNotConfigured",
    "PayloadTooLarge",
    "PlainTextOnly",
    "QuotaExceeded",
    "RateLimited",
    "MailRefused",
    "RecipientNotVerified",
    "RetryPolicy",
    "RevisionConflict",
    "SignatureInvalid",
    "StateLimitExceeded",
    "TooManyAttempts",
    "TooManyRecipients",
    "StreamUnavailable",
    "SubscriptionLimitExceeded",
    "SubscriptionNotFound",
    "TargetRefused",
    "Unauthorized",
    "Unavailable",
    "UnexpectedAnswer",
    "UnknownRecipient",
    "UnsafeFile",
    "WrongCode",
    "webhooks",
]
