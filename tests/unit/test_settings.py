"""Settings that would blur what an event proves are refused at start-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.addresses.models import HTTP_SURFACE, OUTBOUND_SURFACE, STATE_SURFACE
from cairn.settings import RESERVED_SURFACES, InvalidSetting, Settings


def test_mail_may_be_named_as_agentaddress_agents_expect() -> None:
    assert Settings(email_ingress_surface="resend").email_ingress_surface == "resend"


@pytest.mark.parametrize(
    "name", [HTTP_SURFACE, STATE_SURFACE, OUTBOUND_SURFACE, "", "Resend", "mail surface", "x" * 65]
)
def test_mail_cannot_take_another_surface_or_an_unreadable_name(name: str) -> None:
    with pytest.raises(InvalidSetting):
        Settings(email_ingress_surface=name)


def test_the_reserved_names_are_the_surfaces_of_inbox_posts_state_changes_and_outbound_mail() -> None:
    assert RESERVED_SURFACES == {HTTP_SURFACE, STATE_SURFACE, OUTBOUND_SURFACE}


def test_the_environment_fills_what_is_not_given_and_arguments_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_MAX_EVENTS", "500")
    monkeypatch.setenv("CAIRN_TABLE_NAME", "from-environment")
    monkeypatch.setenv("CAIRN_WEBHOOK_ALLOW_LOCAL", "true")
    monkeypatch.setenv("CAIRN_WAKE_TARGET_ARNS", '["arn:aws:sqs:us-east-1:123456789012:runs-*"]')
    monkeypatch.setenv("AWS_REGION", "eu-west-1")

    settings = Settings.from_environment(table_name="given")

    assert settings.table_name == "given"
    assert settings.max_events == 500
    assert settings.webhook_allow_local is True
    assert settings.wake_target_arns == ("arn:aws:sqs:us-east-1:123456789012:runs-*",)
    assert settings.region == "eu-west-1"
    assert Settings.from_environment(region="us-west-2").region == "us-west-2"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CAIRN_MAX_EVENTS", "many"),
        ("CAIRN_MAX_WAIT_SECONDS", "29"),
        ("CAIRN_WAKE_TARGET_ARNS", "arn:aws:sqs:*"),
        ("CAIRN_WEBHOOK_ALLOW_LOCAL", "maybe"),
        ("CAIRN_OUTBOUND", "smtp"),
    ],
)
def test_a_value_the_environment_cannot_hold_stops_the_start(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidSetting, match=variable.removeprefix("CAIRN_").lower()):
        Settings.from_environment()


def test_changed_settings_are_checked_as_new_ones() -> None:
    settings = Settings(max_events="500", email_blob_dir="mail")
    assert (settings.max_events, settings.email_blob_dir) == (500, Path("mail"))
    assert settings.replace(max_events=600).max_events == 600
    with pytest.raises(InvalidSetting, match="owner_reserved_events"):
        settings.replace(owner_reserved_events=500)
    with pytest.raises(InvalidSetting, match="max_events"):
        settings.replace(max_events=True)
