"""Every tunable limit and endpoint, read once from the environment.

The defaults are the AgentAddress limits; CDK sets the same variables in
Lambda, and `cairn serve` in the local process. Nothing else reads
`os.environ` for configuration.

Settings are a msgspec Struct checked by msgspec, not a pydantic model: every
Lambda entry point reads them while its container starts, and the paths
that validate no client input (wake-ups, mail, mail outcomes) would
otherwise import pydantic and build a model for them, most of their cold
start above boto3's own.
"""

from __future__ import annotations

import os
from functools import cache, lru_cache
from pathlib import Path
from typing import Annotated, Any, get_origin, get_type_hints

import msgspec
from msgspec import Meta

from cairn.values import repr_without

DAY_SECONDS = 86_400

SURFACE_NAME_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"
# One plain email address, `name@example.com` (cairn.email.composing checks every address it mails with it).
EMAIL_PATTERN = (
    r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+"
)
# The surfaces of inbox posts, state changes and Cairn's own mail (cairn.addresses.models).
RESERVED_SURFACES = frozenset({"http", "state", "outbound"})


ENV_PREFIX = "CAIRN_"
# Settings whose variable is not `CAIRN_<FIELD>`: Lambda sets the region's.
ENVIRONMENT_NAMES = {"region": "AWS_REGION"}


# The most events a feed may be set to hold. Its head keeps a counter block for every 32 events
# the feed may hold (`cairn.dynamodb.feed_counts`), and every append rewrites the head: at this
# many, the counters take about a quarter of a DynamoDB item's 400 KB, and far larger feeds would
# make the head outgrow its item, so that every append to it failed.
MAX_EVENTS_LIMIT = 100_000


class InvalidSetting(ValueError):
    """A setting its field cannot hold: the deployment refuses to start with it."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Configuration of one Cairn deployment.

    Each value is converted and checked against its field when the settings
    are made (text such as `"500"` or `"true"` is read as the field's type),
    so a deployment with a value its field cannot hold fails at its start;
    `from_environment` fills what is not given from the environment.
    """

    table_name: str = "cairn"
    dynamodb_endpoint: str | None = None
    region: str = "us-east-1"
    public_base_url: str | None = None
    email_domain: str = "cairn.localhost"

    event_retention_seconds: Annotated[int, Meta(ge=1)] = 30 * DAY_SECONDS
    max_events: Annotated[int, Meta(ge=1, le=MAX_EVENTS_LIMIT)] = 1_000
    # The last slots of every feed, which only the owner's own writes (state
    # changes, sends) may fill: inbox posts and mail stop at max_events - this.
    owner_reserved_events: Annotated[int, Meta(ge=0)] = 50
    max_inbox_bytes: Annotated[int, Meta(ge=1)] = 1_000_000
    max_idempotency_key_length: Annotated[int, Meta(ge=1)] = 255
    min_expires_in_seconds: Annotated[int, Meta(ge=1)] = 60
    max_expires_in_seconds: Annotated[int, Meta(ge=1)] = 365 * DAY_SECONDS
    # The lifetime of an address created without `expires_in_seconds`; 0: it never expires, as with
    # AgentAddress. Anyone may create addresses: an operator bounds what they keep by setting it.
    default_expires_in_seconds: Annotated[int, Meta(ge=0)] = 0

    create_rate_per_minute: Annotated[int, Meta(ge=1)] = 20
    poll_rate_per_minute: Annotated[int, Meta(ge=1)] = 30
    # Messages one address accepts per minute; more are refused (SMTP) or dropped with a logged reason (SES).
    email_rate_per_minute: Annotated[int, Meta(ge=1)] = 60

    max_wait_seconds: Annotated[int, Meta(ge=0, le=28)] = 25
    # Server-sent event streams of the feed: how long one connection lasts before the
    # client reconnects (Lambda and API Gateway's STREAM mode both stop at 15 minutes),
    # and how often an idle stream sends a comment that keeps proxies from cutting it.
    max_stream_seconds: Annotated[int, Meta(ge=1, le=870)] = 870
    stream_heartbeat_seconds: Annotated[int, Meta(ge=1)] = 15
    # Reads one address may hold open at once: each keeps an invocation (or a local
    # thread) busy for its whole length, so they are capped per address, not only per client.
    max_streams_per_address: Annotated[int, Meta(ge=1)] = 5
    max_waiting_polls_per_address: Annotated[int, Meta(ge=1)] = 10
    # And one client (an IP address, an IPv6 /64) across every address, since it can make addresses at
    # will: otherwise a few addresses' worth of streams (or of downloads sent to a slow reader) would hold
    # the streaming function's whole reserved concurrency. 0: not counted (`cairn serve`, where every local
    # client is 127.0.0.1).
    max_held_reads_per_client: Annotated[int, Meta(ge=0)] = 20
    default_page_limit: Annotated[int, Meta(ge=1)] = 100
    max_page_limit: Annotated[int, Meta(ge=1)] = 1_000
    # Lambda answers at most 6 MB; a page of events stops growing before that.
    max_page_bytes: Annotated[int, Meta(ge=1_100_000)] = 5_000_000

    state_max_keys: Annotated[int, Meta(ge=1)] = 32
    state_max_bytes: Annotated[int, Meta(ge=1)] = 65_536
    # What one address's files and agent sessions (OpenAI Agents, Strands) may store in all: their bytes
    # or JSON, keys and a row's overhead (`cairn.files.ports.stored_bytes`, `agent_session_items.item_bytes`,
    # `strands_session_items.row_bytes` and `message_bytes`).
    storage_max_bytes: Annotated[int, Meta(ge=1)] = 64 * 1024 * 1024

    # Bearer secret the runtime routes require when set (local serve); in AWS
    # API Gateway authorizes them with IAM instead.
    runtime_key: str | None = None
    # The deployment's own secret (`cairn.server_secret`): given here (`cairn serve` keeps one in its
    # data directory), or the ARN of the Secrets Manager secret that holds it (the stack's).
    server_secret: str | None = None
    server_secret_arn: str | None = None

    # Raw inbound messages: SES's S3 action writes `<prefix><SES message id>`
    # to this bucket; without a bucket they live in `email_blob_dir`.
    email_bucket: str | None = None
    email_prefix: str = ""
    email_blob_dir: Path = Path(".cairn/data/email")
    email_text_max_bytes: Annotated[int, Meta(ge=1)] = 256 * 1024
    email_attachment_max_bytes: Annotated[int, Meta(ge=1)] = 10_000_000
    # The `ingress_surface` of received mail: `resend` lets agents written for
    # AgentAddress keep checking the value they know.
    email_ingress_surface: Annotated[str, Meta(pattern=SURFACE_NAME_PATTERN)] = "email"

    # Wake-ups: subscriptions per address, webhook answer time, retry back-off (doubling from the base,
    # capped at the interval) and how long a failing target is retried before its subscription fails.
    max_subscriptions_per_address: Annotated[int, Meta(ge=1)] = 10
    webhook_timeout_seconds: Annotated[int, Meta(ge=1, le=60)] = 10
    wake_retry_base_seconds: Annotated[int, Meta(ge=1)] = 5
    wake_retry_max_interval_seconds: Annotated[int, Meta(ge=1)] = 3_600
    wake_retry_window_seconds: Annotated[int, Meta(ge=1)] = DAY_SECONDS
    # ARN patterns (`*` wildcards) of the AWS targets subscriptions may name; the stack grants exactly these.
    wake_target_arns: tuple[str, ...] = ()
    # `cairn serve` only: webhooks may use http://127.0.0.1 and http://localhost.
    webhook_allow_local: bool = False

    # Outbound mail. `outbound` names the mailer: `none` (routes answer
    # `outbound_not_configured`) or `ses` (SES v2 from `<address>@email_domain`,
    # events through `ses_configuration_set`); `cairn serve` picks its own.
    outbound: Annotated[str, Meta(pattern=r"^(none|ses)$")] = "none"
    ses_configuration_set: str | None = None
    # The operator's sender: when set, every mail goes `From` it with `Reply-To` the address's own email,
    # as AgentAddress sends (its `OUTBOUND_FROM`); unset, `From` is the address's own email.
    outbound_from: Annotated[str, Meta(pattern=f"^{EMAIL_PATTERN}$", max_length=254)] | None = None
    outbound_max_sends_per_day: Annotated[int, Meta(ge=1)] = 20
    outbound_max_text_bytes: Annotated[int, Meta(ge=1)] = 10_000
    outbound_max_contacts: Annotated[int, Meta(ge=1)] = 10
    outbound_verifications_per_day: Annotated[int, Meta(ge=1)] = 20
    # Codes mailed to one email per UTC day from all addresses together: what bounds the guesses at
    # any one person's codes, however many addresses ask.
    outbound_verifications_per_recipient_per_day: Annotated[int, Meta(ge=1)] = 10
    # How long a send's reserved outcome slot waits for the carrier's report before the outcome sweep
    # spends it on `email.outcome_unknown` (capped at the event retention). It must exceed what a real
    # report can take: a retry may hand a lost message over up to a day after the send
    # (`sending.RECOVERY_SECONDS`), and SES then tries to deliver it for up to 14 hours before it
    # reports; two days leave room for SNS's and Lambda's retries. A shorter value (tests) makes a
    # later report a duplicate of the sweep's outcome.
    outbound_outcome_deadline_seconds: Annotated[int, Meta(ge=1)] = 2 * DAY_SECONDS

    def __post_init__(self) -> None:
        for name, kind in _field_types().items():
            value = getattr(self, name)
            try:
                converted = msgspec.convert(value, kind, strict=False, dec_hook=_from_text)
            except msgspec.ValidationError as error:
                raise InvalidSetting(f"{name}: {error}") from None
            if converted is not value:
                msgspec.structs.force_setattr(self, name, converted)  # the field's own type, e.g. 500 for "500"
        if self.owner_reserved_events >= self.max_events:
            raise InvalidSetting("owner_reserved_events must be below max_events")
        if self.default_expires_in_seconds and not (
            self.min_expires_in_seconds <= self.default_expires_in_seconds <= self.max_expires_in_seconds
        ):
            raise InvalidSetting("default_expires_in_seconds must be 0 or between the min and max expires_in_seconds")
        # Mail named like inbox posts or state changes could not be told from them.
        if self.email_ingress_surface in RESERVED_SURFACES:
            raise InvalidSetting(f"email_ingress_surface must not be one of {sorted(RESERVED_SURFACES)}")

    @classmethod
    def from_environment(cls, **given: Any) -> Settings:
        """The settings given, each other one from its variable (`CAIRN_<FIELD>` upper case; `AWS_REGION`
        for the region) when set, else its default. A tuple's variable holds a JSON array."""
        values = dict(given)
        for name, kind in _field_types().items():
            text = os.environ.get(ENVIRONMENT_NAMES.get(name) or ENV_PREFIX + name.upper())
            if name in values or text is None:
                continue
            try:
                values[name] = msgspec.json.decode(text) if _is_tuple(kind) else text
            except msgspec.DecodeError as error:
                raise InvalidSetting(f"{name}: not a JSON array ({error})") from None
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """These settings with `changes`, checked as a new deployment's."""
        return msgspec.structs.replace(self, **changes)

    def __repr__(self) -> str:
        return repr_without(self, "server_secret")


@cache
def _field_types() -> dict[str, Any]:
    hints = get_type_hints(Settings, include_extras=True)
    return {name: hints[name] for name in Settings.__struct_fields__}


def _is_tuple(kind: Any) -> bool:
    return get_origin(kind) is tuple


def _from_text(kind: type, value: Any) -> Any:
    """A value of a type msgspec does not convert itself (a path) from its text."""
    if kind is Path and isinstance(value, str | Path):
        return Path(value)
    raise NotImplementedError(kind)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first use."""
    return Settings.from_environment()
