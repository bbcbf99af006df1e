"""Settings that would blur what an event proves are refused at start-up."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cairn.addresses.models import HTTP_SURFACE, OUTBOUND_SURFACE, STATE_SURFACE
from cairn.settings import RESERVED_SURFACES, Settings


def test_mail_may_be_named_as_agentaddress_agents_expect() -> None:
    assert Settings(email_ingress_surface="resend").email_ingress_surface == "resend"


@pytest.mark.parametrize("name", [HTTP_SURFACE, STATE_SURFACE, OUTBOUND_SURFACE, "", "Resend", "mail surface", "x" * 65])
def test_mail_cannot_take_another_surface_or_an_unreadable_name(name: str) -> None:
    with pytest.raises(ValidationError):
        Settings(email_ingress_surface=name)


def test_the_reserved_names_are_the_surfaces_of_inbox_posts_state_changes_and_outbound_mail() -> None:
    assert RESERVED_SURFACES == {HTTP_SURFACE, STATE_SURFACE, OUTBOUND_SURFACE}
