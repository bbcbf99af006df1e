"""Context in, deployment out: what the stack accepts, refuses, and passes to the application."""

from __future__ import annotations

import typing
from typing import Any

import aws_cdk as cdk
import msgspec
import pytest

from cairn.settings import EMAIL_PATTERN, MAX_EVENTS_LIMIT, RESERVED_SURFACES, SURFACE_NAME_PATTERN, Settings
from infra import config
from infra.config import LIMIT_DEFAULTS, StageConfig


def from_context(context: dict[str, Any]) -> StageConfig:
    return StageConfig.from_context(cdk.App(context=context).node)


def test_limits_default_to_the_application_defaults() -> None:
    # The stack passes every limit explicitly; a default changed in the
    # application alone would otherwise be silently overridden in AWS.
    application = {field.name: field.default for field in msgspec.structs.fields(Settings)}
    assert {name: application[name] for name in LIMIT_DEFAULTS} == dict(LIMIT_DEFAULTS)


def test_the_largest_feed_is_the_application_limit() -> None:
    assert config._LIMIT_MAXIMUMS["max_events"] == MAX_EVENTS_LIMIT
    assert from_context({"stage": "dev", "max_events": MAX_EVENTS_LIMIT}).limits["max_events"] == MAX_EVENTS_LIMIT


def test_every_numeric_setting_is_a_context_value() -> None:
    numeric = {name for name, annotation in typing.get_type_hints(Settings).items() if annotation is int}
    missing = numeric - set(LIMIT_DEFAULTS)
    assert not missing, f"add {sorted(missing)} to LIMIT_DEFAULTS in infra/config.py"


def test_strings_from_the_cli_and_json_values_from_cdk_json_mean_the_same() -> None:
    from_cli = from_context({"stage": "dev", "ephemeral": "TRUE", "max_events": "500", "api_throttle_rate": "10"})
    from_json = from_context({"stage": "dev", "ephemeral": True, "max_events": 500, "api_throttle_rate": 10})
    assert from_cli == from_json
    assert from_cli.limits["max_events"] == 500
    assert from_cli.limits["state_max_keys"] == LIMIT_DEFAULTS["state_max_keys"]


def test_an_empty_string_is_an_unset_value() -> None:
    # `-c email_domain=` is how a shell script says "no email" without editing cdk.json.
    assert from_context({"stage": "dev", "email_domain": ""}).email_domain is None


def test_public_base_url_comes_only_from_a_custom_domain() -> None:
    assert from_context({"stage": "dev"}).public_base_url is None
    custom = from_context(
        {
            "stage": "dev",
            "api_domain_name": "api.example.com",
            "api_certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/abc-123",
        }
    )
    assert custom.public_base_url == "https://api.example.com"
    assert custom.application_environment["CAIRN_PUBLIC_BASE_URL"] == "https://api.example.com"


@pytest.mark.parametrize(
    "context",
    [
        {},
        {"stage": "has_underscore"},
        {"stage": "dev", "ephemeral": "yes"},
        {"stage": "dev", "max_events": "1e3"},
        {"stage": "dev", "max_events": 0},
        {"stage": "dev", "max_events": True},
        {"stage": "dev", "max_events": 100_001},
        {"stage": "dev", "max_wait_seconds": 29},
        {"stage": "dev", "max_stream_seconds": 871},
        {"stage": "dev", "email_domain": "Not A Domain"},
        {"stage": "dev", "activate_receipt_rule_set": "true"},
        {"stage": "dev", "api_domain_name": "api.example.com"},
        {
            "stage": "dev",
            "api_domain_name": "api.example.com",
            "api_certificate_arn": "arn:aws:iam::123456789012:server-certificate/x",
        },
        {"stage": "dev", "alarm_topic_arn": "ops-team"},
        {"stage": "dev", "api_throttle_rate": 100, "api_throttle_burst": 50},
        {"stage": "dev", "log_retention_days": 31},
        {"stage": "dev", "api_reserved_concurrency": 0},
        {"stage": "dev", "api_reserved_concurrency": "many"},
        {"stage": "dev", "stream_reserved_concurrency": 0},
        {"stage": "dev", "email_ingress_surface": "http"},
        {"stage": "dev", "email_ingress_surface": "state"},
        {"stage": "dev", "email_ingress_surface": "Resend Mail"},
        {"stage": "dev", "wake_target_arns": "*"},
        {"stage": "dev", "wake_target_arns": ["arn:aws:s3:::bucket"]},
        {"stage": "dev", "wake_target_arns": [7]},
        {"stage": "dev", "email_domain": "mail.example.com", "outbound_from": "Agents <agents@example.com>"},
        {"stage": "dev", "email_domain": "mail.example.com", "outbound_from": "agents@example.com\r\nBcc: x@y.z"},
        {"stage": "dev", "outbound_from": "agents@example.com"},
    ],
)
def test_unusable_context_is_refused_before_synthesis(context: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        from_context(context)


def test_wake_target_arns_come_as_a_list_or_comma_separated() -> None:
    arns = ("arn:aws:sqs:eu-west-1:123456789012:agent-*", "arn:aws:lambda:eu-west-1:123456789012:function:run")
    assert from_context({"stage": "dev", "wake_target_arns": list(arns)}).wake_target_arns == arns
    assert from_context({"stage": "dev", "wake_target_arns": ",".join(arns)}).wake_target_arns == arns
    assert from_context({"stage": "dev"}).wake_target_arns == ()


def test_zero_wait_is_a_valid_limit() -> None:
    assert from_context({"stage": "dev", "max_wait_seconds": "0"}).limits["max_wait_seconds"] == 0


def test_the_mail_surface_is_a_context_value_with_the_application_rules() -> None:
    assert StageConfig(stage="dev").email_ingress_surface == Settings().email_ingress_surface
    assert f"^{config._SURFACE_NAME.pattern}$" == SURFACE_NAME_PATTERN
    assert config._RESERVED_SURFACES == RESERVED_SURFACES
    moved = from_context({"stage": "dev", "email_ingress_surface": "resend"})
    assert moved.application_environment["CAIRN_EMAIL_INGRESS_SURFACE"] == "resend"


def test_the_operator_sender_is_a_context_value_with_the_application_rules() -> None:
    assert StageConfig(stage="dev").outbound_from is Settings().outbound_from is None
    assert config._SENDER.pattern == EMAIL_PATTERN
    sending = from_context({"stage": "dev", "email_domain": "mail.example.com", "outbound_from": "agents@example.com"})
    assert sending.application_environment["CAIRN_OUTBOUND_FROM"] == "agents@example.com"
    assert Settings(outbound_from=sending.outbound_from).outbound_from == "agents@example.com"
    assert "CAIRN_OUTBOUND_FROM" not in from_context({"stage": "dev"}).application_environment


def test_a_reserve_that_leaves_outsiders_no_slot_is_refused_at_synthesis() -> None:
    with pytest.raises(ValueError, match="owner_reserved_events"):
        StageConfig(stage="dev", limits={**LIMIT_DEFAULTS, "max_events": 50, "owner_reserved_events": 50})
