"""What differs between deployments of the same stack, read from CDK context.

Every value is checked here, before any construct exists, so a typo fails
`cdk synth` with a message naming the context key instead of failing a Lambda
cold start in production.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs
from constructs import Node

PROJECT_DIR = Path(__file__).resolve().parent.parent

# The stage becomes part of the CloudFormation stack name, the API Gateway
# stage and the SES rule set name, so it must be valid for all three.
_STAGE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,63}")
# The prefix of physical names (alarms, the REST API, the SES rule set and configuration set); the
# configuration set's `-outbound` suffix must still fit SES's 64 characters.
_NAME_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,54}")
_DOMAIN_NAME = re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")
_CERTIFICATE_ARN = re.compile(r"arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[A-Za-z0-9-]+")
# The application's `email_ingress_surface` rule (functions/cairn/settings.py);
# `http` and `state` name inbox posts and state changes, so mail may not take them.
_SURFACE_NAME = re.compile(r"[a-z][a-z0-9_.-]{0,63}")
_RESERVED_SURFACES = frozenset({"http", "state", "outbound"})
# The application's `outbound_from` rule (functions/cairn/settings.py, EMAIL_PATTERN): one plain address;
# `budget_emails` take it too.
_SENDER = re.compile(
    r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+"
)
# AWS Budgets emails at most this many addresses about a notification.
BUDGET_EMAILS = 10
_TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}")
# Wake-up targets: queues, event buses, functions and state machines, `*` allowed after the service.
_WAKE_TARGET_ARN = re.compile(
    r"arn:aws[a-z-]*:(sqs|events|lambda|states):[a-z0-9*-]+:(\d{12}|\*):[A-Za-z0-9_.:/*$-]{1,512}"
)

# API Gateway ends every request at 29 s; a long-poll must answer before that.
API_GATEWAY_TIMEOUT_SECONDS = 29
# API Gateway's STREAM mode and Lambda both stop at 15 minutes; an event stream
# ends by itself half a minute before, so its client sees a clean end, not a cut.
STREAM_LIMIT_SECONDS = 15 * 60
MAX_STREAM_SECONDS = STREAM_LIMIT_SECONDS - 30
# What a WAF rate-based rule accepts as its limit (requests per evaluation window).
WAF_RATE_LIMITS = (10, 2_000_000_000)

# The application's limits (functions/cairn/settings.py, variable CAIRN_<KEY>)
# with its defaults. Every deployment passes all of them, so the function's
# configuration shows the values in force, and the email bucket can expire raw
# messages with the events they belong to. A test keeps this table equal to
# the application's defaults.
LIMIT_DEFAULTS: Mapping[str, int] = {
    "event_retention_seconds": 30 * 86_400,
    "max_events": 1_000,
    "owner_reserved_events": 50,
    "max_inbox_bytes": 1_000_000,
    "max_idempotency_key_length": 255,
    "min_expires_in_seconds": 60,
    "max_expires_in_seconds": 365 * 86_400,
    "default_expires_in_seconds": 0,
    "create_rate_per_minute": 20,
    "poll_rate_per_minute": 30,
    "email_rate_per_minute": 60,
    "max_wait_seconds": 25,
    "max_stream_seconds": MAX_STREAM_SECONDS,
    "stream_heartbeat_seconds": 15,
    "max_streams_per_address": 5,
    "max_waiting_polls_per_address": 10,
    "max_held_reads_per_client": 20,
    "default_page_limit": 100,
    "max_page_limit": 1_000,
    "max_page_bytes": 5_000_000,
    "state_max_keys": 32,
    "state_max_bytes": 65_536,
    "storage_max_bytes": 64 * 1024 * 1024,
    "email_text_max_bytes": 256 * 1024,
    "email_attachment_max_bytes": 10_000_000,
    "outbound_max_sends_per_day": 20,
    "outbound_max_text_bytes": 10_000,
    "outbound_max_contacts": 10,
    "outbound_verifications_per_day": 20,
    "outbound_verifications_per_recipient_per_day": 10,
    "outbound_outcome_deadline_seconds": 2 * 86_400,
    "max_subscriptions_per_address": 10,
    "webhook_timeout_seconds": 10,
    "wake_retry_base_seconds": 5,
    "wake_retry_max_interval_seconds": 3_600,
    "wake_retry_window_seconds": 86_400,
}

# Zero means "never wait", and "no reserve": the limits for which zero makes sense.
_LIMIT_MINIMUMS = {
    "max_wait_seconds": 0,
    "owner_reserved_events": 0,
    "default_expires_in_seconds": 0,
    "max_held_reads_per_client": 0,
}
# The application's upper bounds (its `MAX_EVENTS_LIMIT`: a feed's head counts its events in blocks).
_LIMIT_MAXIMUMS = {"max_events": 100_000}


def cdk_json_context() -> dict[str, Any]:
    """The context defaults declared in cdk.json, shared by app.py and the tests."""
    context: dict[str, Any] = json.loads((PROJECT_DIR / "cdk.json").read_text())["context"]
    return context


@dataclass(frozen=True)
class StageConfig:
    """One deployment of Cairn.

    `ephemeral` is for short-lived stages (previews, CI): stateful resources
    are deleted with the stack instead of being retained and protected.
    `email_domain` turns on inbound email, whose events carry
    `email_ingress_surface` (AgentAddress's agents check `resend`); `api_domain_name` with
    `api_certificate_arn` puts the API behind a custom domain, which then
    becomes the public base URL of every link the service hands out.
    """

    # API Gateway's own default stage name, for a CairnService given no props; Cairn's own stack
    # takes it from context, where it is required (cdk.json sets it).
    stage: str = "prod"
    ephemeral: bool = False
    email_domain: str | None = None
    activate_receipt_rule_set: bool = False
    email_ingress_surface: str = "email"
    # The operator's sender (`CAIRN_OUTBOUND_FROM`): every mail from it, `Reply-To` the address's own email,
    # as AgentAddress sends. None: each address sends from its own email.
    outbound_from: str | None = None
    api_domain_name: str | None = None
    api_certificate_arn: str | None = None
    alarm_topic_arn: str | None = None
    api_throttle_rate: int = 100
    api_throttle_burst: int = 200
    # Concurrency set aside for (and capped at) the API function: a reservation guarantees the
    # writers (inbox posts, state writes) their share of the account. None: unreserved.
    api_reserved_concurrency: int | None = None
    # Concurrency set aside for (and capping) the streaming function, where polls, long-polls,
    # event streams, attachment downloads and `/mcp` calls run: waiting readers can hold this much,
    # never more.
    stream_reserved_concurrency: int = 50
    log_retention_days: int = 30
    # Requests one client IP may make in five minutes before a WAF web ACL on the stage blocks it
    # (`infra/firewall.py`). None: no web ACL, which WAF would bill by the month and the request.
    waf_ip_rate_limit: int | None = None
    # The table's most read and write request units a second (DynamoDB's maximum throughput for an
    # on-demand table): a ceiling on what traffic can cost, past which requests are throttled (503 with
    # Retry-After, and the `table-throttles` alarm). None: bounded only by the account's quota.
    table_max_read_request_units: int | None = None
    table_max_write_request_units: int | None = None
    # A monthly cost budget for the service's resources, in US dollars (`infra/budget.py`): AWS Budgets
    # tells `budget_emails` (and `alarm_topic_arn`) when the month's cost passes 80 % of it, and when it
    # is forecast to pass all of it. None: no budget.
    monthly_budget_usd: int | None = None
    budget_emails: tuple[str, ...] = ()
    # Keys of LIMIT_DEFAULTS; a partial table means "the defaults for the rest".
    limits: Mapping[str, int] = field(default_factory=dict)
    # ARN patterns of the AWS services wake-up subscriptions may deliver to; the functions get exactly these.
    wake_target_arns: tuple[str, ...] = ()
    # Prefix of the physical names the service gives its resources; None: `cairn-<stage>` for Cairn's own
    # stack, a name derived from the construct's path for a CairnService in another app.
    name_prefix: str | None = None

    def __post_init__(self) -> None:
        if not _STAGE_NAME.fullmatch(self.stage):
            raise ValueError(
                f"stage {self.stage!r} must start with a letter and contain only "
                "letters, digits and hyphens (at most 64 characters)"
            )
        if self.name_prefix is not None and not _NAME_PREFIX.fullmatch(self.name_prefix):
            raise ValueError(
                f"'name_prefix' {self.name_prefix!r} must start with a letter and contain only "
                "letters, digits and hyphens (at most 55 characters)"
            )
        for key, value in (("email_domain", self.email_domain), ("api_domain_name", self.api_domain_name)):
            if value is not None and not _DOMAIN_NAME.fullmatch(value):
                raise ValueError(f"context value {key!r} must be a lower-case domain name, got {value!r}")
        surface = self.email_ingress_surface
        if not _SURFACE_NAME.fullmatch(surface) or surface in _RESERVED_SURFACES:
            raise ValueError(
                f"'email_ingress_surface' must be a lower-case name other than {sorted(_RESERVED_SURFACES)}, "
                f"got {surface!r}"
            )
        if (self.api_domain_name is None) != (self.api_certificate_arn is None):
            raise ValueError("context values 'api_domain_name' and 'api_certificate_arn' go together")
        if self.api_certificate_arn is not None and not _CERTIFICATE_ARN.fullmatch(self.api_certificate_arn):
            raise ValueError(f"'api_certificate_arn' is not an ACM certificate ARN: {self.api_certificate_arn!r}")
        if self.alarm_topic_arn is not None and not _TOPIC_ARN.fullmatch(self.alarm_topic_arn):
            raise ValueError(f"'alarm_topic_arn' is not an SNS topic ARN: {self.alarm_topic_arn!r}")
        if self.activate_receipt_rule_set and self.email_domain is None:
            raise ValueError("'activate_receipt_rule_set' needs 'email_domain'")
        self._check_sender()
        if self.api_throttle_burst < self.api_throttle_rate:
            raise ValueError("'api_throttle_burst' must be at least 'api_throttle_rate'")
        self._check_ceilings()
        if self.log_retention_days not in _RETENTION_DAYS:
            raise ValueError(
                f"'log_retention_days' must be one of CloudWatch's values {sorted(_RETENTION_DAYS)}, "
                f"got {self.log_retention_days}"
            )
        self._check_wake_targets()
        self._check_limits()

    def _check_ceilings(self) -> None:
        """The optional bounds on what a deployment's traffic can cost."""
        lowest, highest = WAF_RATE_LIMITS
        if self.waf_ip_rate_limit is not None and not lowest <= self.waf_ip_rate_limit <= highest:
            raise ValueError(
                f"'waf_ip_rate_limit' must be from {lowest} to {highest:,} (WAF's bounds), got {self.waf_ip_rate_limit}"
            )
        for key in ("table_max_read_request_units", "table_max_write_request_units"):
            units = getattr(self, key)
            if units is not None and units < 1:
                raise ValueError(f"'{key}' must be a whole number of request units, at least 1, got {units}")
        self._check_budget()

    def _check_budget(self) -> None:
        if self.monthly_budget_usd is None:
            if self.budget_emails:
                raise ValueError("'budget_emails' needs 'monthly_budget_usd': there is no budget to tell them of")
            return
        if self.monthly_budget_usd < 1:
            raise ValueError(
                f"'monthly_budget_usd' must be a whole number of dollars, at least 1, got {self.monthly_budget_usd}"
            )
        if not self.budget_emails and self.alarm_topic_arn is None:
            raise ValueError("'monthly_budget_usd' needs 'budget_emails' or 'alarm_topic_arn': someone to tell")
        if len(self.budget_emails) > BUDGET_EMAILS:
            raise ValueError(f"'budget_emails' may name at most {BUDGET_EMAILS} addresses (AWS Budgets' limit)")
        for email in self.budget_emails:
            if len(email) > 254 or not _SENDER.fullmatch(email):
                raise ValueError(f"'budget_emails' entries must be plain email addresses, got {email!r}")

    def _check_wake_targets(self) -> None:
        for pattern in self.wake_target_arns:
            if not _WAKE_TARGET_ARN.fullmatch(pattern):
                raise ValueError(
                    f"'wake_target_arns' entries must be SQS, EventBridge, Lambda, Lambda durable execution or "
                    f"Step Functions ARNs (with * wildcards), got {pattern!r}"
                )

    def _check_sender(self) -> None:
        sender = self.outbound_from
        if sender is None:
            return
        if len(sender) > 254 or not _SENDER.fullmatch(sender):
            raise ValueError(f"'outbound_from' must be one plain email address like agents@example.com, got {sender!r}")
        if self.email_domain is None:
            raise ValueError("'outbound_from' needs 'email_domain': mail is sent only where it can be answered")

    def _check_limits(self) -> None:
        unknown = set(self.limits) - set(LIMIT_DEFAULTS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}")
        limits = {**LIMIT_DEFAULTS, **self.limits}
        if limits["owner_reserved_events"] >= limits["max_events"]:
            raise ValueError("'owner_reserved_events' must be below 'max_events': outsiders need a slot")
        object.__setattr__(self, "limits", {**LIMIT_DEFAULTS, **self.limits})
        for key, maximum in _LIMIT_MAXIMUMS.items():
            if self.limits[key] > maximum:
                raise ValueError(f"'{key}' must be at most {maximum:,}")
        if self.limits["max_wait_seconds"] >= API_GATEWAY_TIMEOUT_SECONDS:
            raise ValueError(
                f"'max_wait_seconds' must stay below API Gateway's {API_GATEWAY_TIMEOUT_SECONDS} s timeout"
            )
        if self.limits["max_stream_seconds"] > MAX_STREAM_SECONDS:
            raise ValueError(
                f"'max_stream_seconds' must be at most {MAX_STREAM_SECONDS}, to end before the 15-minute cut"
            )

    @classmethod
    def from_context(cls, node: Node) -> StageConfig:
        """Read the deployment from context; only `stage` is required (cdk.json sets it).

        `cdk deploy -c key=value` passes strings, cdk.json passes JSON values;
        both are accepted.
        """
        stage = node.try_get_context("stage")
        if stage is None:
            raise ValueError("context value 'stage' is required (cdk.json sets it)")

        def text(key: str) -> str | None:
            value = node.try_get_context(key)
            return None if value in (None, "") else str(value)

        def number(key: str, default: int, minimum: int = 1) -> int:
            return _as_int(key, node.try_get_context(key), default, minimum)

        def optional_number(key: str) -> int | None:
            """A whole number of at least 1, or None when the context leaves it out."""
            return None if text(key) is None else number(key, 0)

        return cls(
            stage=str(stage),
            ephemeral=_as_bool("ephemeral", node.try_get_context("ephemeral")),
            email_domain=text("email_domain"),
            activate_receipt_rule_set=_as_bool(
                "activate_receipt_rule_set", node.try_get_context("activate_receipt_rule_set")
            ),
            email_ingress_surface=text("email_ingress_surface") or cls.email_ingress_surface,
            outbound_from=text("outbound_from"),
            api_domain_name=text("api_domain_name"),
            api_certificate_arn=text("api_certificate_arn"),
            alarm_topic_arn=text("alarm_topic_arn"),
            api_throttle_rate=number("api_throttle_rate", cls.api_throttle_rate),
            api_throttle_burst=number("api_throttle_burst", cls.api_throttle_burst),
            api_reserved_concurrency=optional_number("api_reserved_concurrency"),
            stream_reserved_concurrency=number("stream_reserved_concurrency", cls.stream_reserved_concurrency),
            log_retention_days=number("log_retention_days", cls.log_retention_days),
            waf_ip_rate_limit=optional_number("waf_ip_rate_limit"),
            table_max_read_request_units=optional_number("table_max_read_request_units"),
            table_max_write_request_units=optional_number("table_max_write_request_units"),
            monthly_budget_usd=optional_number("monthly_budget_usd"),
            budget_emails=_as_list("budget_emails", node.try_get_context("budget_emails")),
            wake_target_arns=_as_list("wake_target_arns", node.try_get_context("wake_target_arns")),
            name_prefix=text("name_prefix"),
            limits={key: number(key, default, _LIMIT_MINIMUMS.get(key, 1)) for key, default in LIMIT_DEFAULTS.items()},
        )

    @property
    def stack_name(self) -> str:
        """CloudFormation stack name; one stack per stage in an account and region."""
        return f"cairn-{self.stage}"

    @property
    def resource_name_prefix(self) -> str:
        """What the physical names of the service's resources start with."""
        return self.name_prefix or self.stack_name

    @property
    def removal_policy(self) -> RemovalPolicy:
        """What CloudFormation does with stateful resources when they leave the stack."""
        return RemovalPolicy.DESTROY if self.ephemeral else RemovalPolicy.RETAIN

    @property
    def log_retention(self) -> logs.RetentionDays:
        """How long CloudWatch keeps function and access logs."""
        return _RETENTION_DAYS[self.log_retention_days]

    @property
    def public_base_url(self) -> str | None:
        """The base URL the stack fixes, or None to let the service derive it per request.

        Without a custom domain the service answers on API Gateway's own URL,
        which the application already reconstructs from each request (domain
        and stage); baking it into the function would need the API's id,
        which depends on the function: a circular reference.
        """
        return f"https://{self.api_domain_name}" if self.api_domain_name else None

    @property
    def application_environment(self) -> dict[str, str]:
        """The CAIRN_* settings this deployment fixes (the table and bucket come from the stack)."""
        environment = {f"CAIRN_{key.upper()}": str(value) for key, value in self.limits.items()}
        environment["CAIRN_EMAIL_INGRESS_SURFACE"] = self.email_ingress_surface
        if self.outbound_from is not None:
            environment["CAIRN_OUTBOUND_FROM"] = self.outbound_from
        if self.email_domain is not None:
            environment["CAIRN_EMAIL_DOMAIN"] = self.email_domain
        if self.public_base_url is not None:
            environment["CAIRN_PUBLIC_BASE_URL"] = self.public_base_url
        if self.wake_target_arns:
            environment["CAIRN_WAKE_TARGET_ARNS"] = json.dumps(list(self.wake_target_arns))
        return environment


# The retention periods CloudWatch Logs accepts, in days.
_RETENTION_DAYS = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


def _as_bool(name: str, value: object) -> bool:
    """Accept JSON booleans (cdk.json) and the strings `-c name=true` produces."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"context value {name!r} must be true or false, got {value!r}")


def _as_list(name: str, value: object) -> tuple[str, ...]:
    """Accept a JSON list (cdk.json) or a comma-separated string (`-c name=a,b`)."""
    if value in (None, ""):
        return ()
    items = value if isinstance(value, list) else str(value).split(",")
    if not all(isinstance(item, str) for item in items):
        raise ValueError(f"context value {name!r} must be a list of strings, got {value!r}")
    return tuple(item.strip() for item in items if item.strip())


def _as_int(name: str, value: object, default: int, minimum: int) -> int:
    """Accept JSON integers (cdk.json) and digit strings (`-c name=500`), never booleans or fractions."""
    if value is None:
        return default
    if isinstance(value, bool) or not (isinstance(value, int) or str(value).strip().isdigit()):
        raise ValueError(f"context value {name!r} must be a whole number, got {value!r}")
    number = value if isinstance(value, int) else int(str(value).strip())
    if number < minimum:
        raise ValueError(f"context value {name!r} must be at least {minimum}, got {number}")
    return number
