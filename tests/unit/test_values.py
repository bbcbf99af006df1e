"""The value objects kept as msgspec Structs: what they show of themselves, and what they refuse."""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from cairn.addresses.inbox_settings import InboxSettings, verifier
from cairn.addresses.quota import FeedQuota
from cairn.settings import InvalidSetting, Settings
from cairn.wakeups.models import SigningSecret, Subscription, Target, TargetKind

SECRET = "whsec_never-in-a-log-line"


def test_no_repr_shows_a_secret_but_each_shows_the_rest() -> None:
    settings = Settings(server_secret=SECRET, table_name="cairn-values")
    signed = verifier("github", SECRET, None, now=1.0)
    subscription = Subscription(
        id="sub_1",
        address_id="addr_1",
        target=Target(TargetKind.WEBHOOK, {"url": "https://example.com/hook"}),
        types=("job.done",),
        description="values",
        created_at=1.0,
        secrets=(SigningSecret(SECRET),),
    )
    for value, shown in [
        (settings, "table_name='cairn-values'"),
        (signed, "kind='github'"),
        (InboxSettings(verifiers=(signed,)), "kind='github'"),
        (subscription, "url': 'https://example.com/hook'"),
    ]:
        assert SECRET not in repr(value)
        assert shown in repr(value)


def test_replace_checks_the_new_value_as_the_constructor_does() -> None:
    with pytest.raises(InvalidSetting):
        Settings().replace(owner_reserved_events=10**9)
    with pytest.raises(ValueError, match="owner's reserve"):
        replace(FeedQuota(max_events=10), owner_reserve=10)
    assert Settings().replace(max_events="2000").max_events == 2000


def test_equal_values_are_equal_and_hash_alike() -> None:
    first, second = verifier("github", SECRET, None, now=1.0), verifier("github", SECRET, None, now=1.0)
    assert first == second
    assert hash(first) == hash(second)
    assert first != replace(second, created_at=2.0)
