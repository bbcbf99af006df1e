"""Every tunable limit and endpoint, read once from the environment.

The defaults are the AgentAddress limits; CDK sets the same variables in
Lambda, and `cairn serve` in the local process. Nothing else reads
`os.environ` for configuration.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, get_origin

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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


class Settings(BaseModel):
    """Configuration of one Cairn deployment.

    Each field not given as an argument comes from the environment variable
    `CAIRN_<FIELD>` (upper case; its alias for `region`), else its default.
    Values are text, converted by the field's validation; a tuple is a JSON
    array. (This is what pydantic-settings would do here; a new Lambda
    container would import it for tens of milliseconds before its first answer.)
    """

    model_config = ConfigDict(frozen=True, validate_by_name=True, validate_by_alias=True)

    table_name: str = "cairn"
    dynamodb_endpoint: str | None = None
    region: str = Field(default="us-east-1", validation_alias="AWS_REGION")
    public_base_url: str | None = None
    email_domain: str = "cairn.localhost"

    event_retention_seconds: int = Field(default=30 * DAY_SECONDS, ge=1)
    max_events: int = Field(default=1_000, ge=1)
    # The last slots of every feed, which only the owner's own writes (state
    # changes, sends) may fill: inbox posts and mail stop at max_events - this.
    owner_reserved_events: int = Field(default=50, ge=0)
    max_inbox_bytes: int = Field(default=1_000_000, ge=1)
    max_idempotency_key_length: int = Field(default=255, ge=1)
    min_expires_in_seconds: int = Field(default=60, ge=1)
    max_expires_in_seconds: int = Field(default=365 * DAY_SECONDS, ge=1)

    create_rate_per_minute: int = Field(default=20, ge=1)
    poll_rate_per_minute: int = Field(default=30, ge=1)
    # Messages one address accepts per minute; more are refused (SMTP) or dropped with a logged reason (SES).
    email_rate_per_minute: int = Field(default=60, ge=1)

    max_wait_seconds: int = Field(default=25, ge=0, le=28)
    # Server-sent event streams of the feed: how long one connection lasts before the
    # client reconnects (Lambda and API Gateway's STREAM mode both stop at 15 minutes),
    # and how often an idle stream sends a comment that keeps proxies from cutting it.
    max_stream_seconds: int = Field(default=870, ge=1, le=870)
    stream_heartbeat_seconds: int = Field(default=15, ge=1)
    # Reads one address may hold open at once: each keeps an invocation (or a local
    # thread) busy for its whole length, so they are capped per address, not only per client.
    max_streams_per_address: int = Field(default=5, ge=1)
    max_waiting_polls_per_address: int = Field(default=10, ge=1)
    default_page_limit: int = Field(default=100, ge=1)
    max_page_limit: int = Field(default=1_000, ge=1)
    # Lambda answers at most 6 MB; a page of events stops growing before that.
    max_page_bytes: int = Field(default=5_000_000, ge=1_100_000)

    state_max_keys: int = Field(default=32, ge=1)
    state_max_bytes: int = Field(default=65_536, ge=1)

    # Bearer secret the runtime routes require when set (local serve); in AWS
    # API Gateway authorizes them with IAM instead.
    runtime_key: str | None = None
    # The deployment's own secret (`cairn.server_secret`): given here (`cairn serve` keeps one in its
    # data directory), or the ARN of the Secrets Manager secret that holds it (the stack's).
    server_secret: str | None = Field(default=None, repr=False)
    server_secret_arn: str | None = None

    # Raw inbound messages: SES's S3 action writes `<prefix><SES message id>`
    # to this bucket; without a bucket they live in `email_blob_dir`.
    email_bucket: str | None = None
    email_prefix: str = ""
    email_blob_dir: Path = Path(".cairn/data/email")
    email_text_max_bytes: int = Field(default=256 * 1024, ge=1)
    email_attachment_max_bytes: int = Field(default=10_000_000, ge=1)
    # The `ingress_surface` of received mail: `resend` lets agents written for
    # AgentAddress keep checking the value they know.
    email_ingress_surface: str = Field(default="email", pattern=SURFACE_NAME_PATTERN)

    # Wake-ups: subscriptions per address, webhook answer time, retry back-off (doubling from the base,
    # capped at the interval) and how long a failing target is retried before its subscription fails.
    max_subscriptions_per_address: int = Field(default=10, ge=1)
    webhook_timeout_seconds: int = Field(default=10, ge=1, le=60)
    wake_retry_base_seconds: int = Field(default=5, ge=1)
    wake_retry_max_interval_seconds: int = Field(default=3_600, ge=1)
    wake_retry_window_seconds: int = Field(default=DAY_SECONDS, ge=1)
    # ARN patterns (`*` wildcards) of the AWS targets subscriptions may name; the stack grants exactly these.
    wake_target_arns: tuple[str, ...] = ()
    # `cairn serve` only: webhooks may use http://127.0.0.1 and http://localhost.
    webhook_allow_local: bool = False

    # Outbound mail. `outbound` names the mailer: `none` (routes answer
    # `outbound_not_configured`) or `ses` (SES v2 from `<address>@email_domain`,
    # events through `ses_configuration_set`); `cairn serve` picks its own.
    outbound: str = Field(default="none", pattern=r"^(none|ses)$")
    ses_configuration_set: str | None = None
    # The operator's sender: when set, every mail goes `From` it with `Reply-To` the address's own email,
    # as AgentAddress sends (its `OUTBOUND_FROM`); unset, `From` is the address's own email.
    outbound_from: str | None = Field(default=None, pattern=f"^{EMAIL_PATTERN}$", max_length=254)
    outbound_max_sends_per_day: int = Field(default=20, ge=1)
    outbound_max_text_bytes: int = Field(default=10_000, ge=1)
    outbound_max_contacts: int = Field(default=10, ge=1)
    outbound_verifications_per_day: int = Field(default=20, ge=1)
    # Codes mailed to one email per UTC day from all addresses together: what bounds the guesses at
    # any one person's codes, however many addresses ask.
    outbound_verifications_per_recipient_per_day: int = Field(default=10, ge=1)
    # How long a send's reserved outcome slot waits for the carrier's report before the outcome sweep
    # spends it on `email.outcome_unknown` (capped at the event retention). It must exceed what a real
    # report can take: a retry may hand a lost message over up to a day after the send
    # (`sending.RECOVERY_SECONDS`), and SES then tries to deliver it for up to 14 hours before it
    # reports; two days leave room for SNS's and Lambda's retries. A shorter value (tests) makes a
    # later report a duplicate of the sweep's outcome.
    outbound_outcome_deadline_seconds: int = Field(default=2 * DAY_SECONDS, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _environment_fills_the_rest(cls, given: Any) -> Any:
        if not isinstance(given, dict):
            return given
        values = dict(given)
        for name, field in cls.model_fields.items():
            alias = field.validation_alias if isinstance(field.validation_alias, str) else None
            if name in values or (alias is not None and alias in values):
                continue
            text = os.environ.get(alias or ENV_PREFIX + name.upper())
            if text is not None:
                values[name] = json.loads(text) if get_origin(field.annotation) in (tuple, list) else text
        return values

    @model_validator(mode="after")
    def _outsiders_keep_a_slot(self) -> Settings:
        if self.owner_reserved_events >= self.max_events:
            raise ValueError("owner_reserved_events must be below max_events")
        return self

    @field_validator("email_ingress_surface")
    @classmethod
    def _mail_surface_is_its_own(cls, value: str) -> str:
        # Mail named like inbox posts or state changes could not be told from them.
        if value in RESERVED_SURFACES:
            raise ValueError(f"must not be one of {sorted(RESERVED_SURFACES)}")
        return value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first use."""
    return Settings()
