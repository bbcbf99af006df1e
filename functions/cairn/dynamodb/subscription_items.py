"""Subscription items: the only code that knows their attribute names."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from cairn.dynamodb import keys
from cairn.dynamodb.items import get_int, get_n, get_s, key, n, s
from cairn.wakeups.models import Attempt, SigningSecret, Subscription, SubscriptionStatus, Target, TargetKind

Item = dict[str, Any]

STATUS = "status"
CURSOR = "cursor"
THROUGH = "through"
RETRY_AT = "retry_at"
FAILING_SINCE = "failing_since"
FAILURES = "failures"
ATTEMPTS = "attempts"
SECRETS = "secrets"
LEASE_OWNER = "lease_owner"
LEASE_UNTIL = "lease_until"
COUNT = "n"


def subscription_key(address_id: str, subscription_id: str) -> Item:
    return key(keys.address_pk(address_id), keys.subscription_sk(subscription_id))


def subscription_item(subscription: Subscription, *, expires_at: float | None) -> Item:
    item = {
        **subscription_key(subscription.address_id, subscription.id),
        "kind": s(subscription.target.kind.value),
        "params": s(json.dumps(dict(subscription.target.params), sort_keys=True)),
        "types": s(json.dumps(list(subscription.types))),
        "created_at": n(round(subscription.created_at, 3)),
        STATUS: s(subscription.status.value),
        CURSOR: n(subscription.cursor),
        THROUGH: n(subscription.cursor),
        FAILURES: n(0),
        ATTEMPTS: s("[]"),
        SECRETS: secrets_value(subscription.secrets),
    }
    if subscription.description is not None:
        item["description"] = s(subscription.description)
    if expires_at is not None:
        item["expires_at"] = n(int(expires_at))
    return item


def secrets_value(secrets: tuple[SigningSecret, ...] | list[SigningSecret]) -> dict[str, str]:
    return s(json.dumps([{"secret": item.secret, "expires_at": item.expires_at} for item in secrets]))


def attempts_value(attempts: tuple[Attempt, ...] | list[Attempt]) -> dict[str, str]:
    return s(json.dumps([msgspec.structs.asdict(attempt) for attempt in attempts]))


def subscription_from_item(item: Item) -> Subscription:
    pk = get_s(item, "pk") or ""
    sk = get_s(item, "sk") or ""
    return Subscription(
        id=sk.removeprefix(keys.SUBSCRIPTION_PREFIX),
        address_id=pk.removeprefix("A#"),
        target=Target(TargetKind(get_s(item, "kind") or ""), json.loads(get_s(item, "params") or "{}")),
        types=tuple(json.loads(get_s(item, "types") or "[]")),
        description=get_s(item, "description"),
        created_at=get_n(item, "created_at") or 0.0,
        status=SubscriptionStatus(get_s(item, STATUS) or ""),
        cursor=get_int(item, CURSOR),
        retry_at=get_n(item, RETRY_AT),
        failing_since=get_n(item, FAILING_SINCE),
        failures=get_int(item, FAILURES),
        attempts=tuple(Attempt(**entry) for entry in json.loads(get_s(item, ATTEMPTS) or "[]")),
        lease_until=get_n(item, LEASE_UNTIL),
        secrets=tuple(SigningSecret(**entry) for entry in json.loads(get_s(item, SECRETS) or "[]")),
        expires_at=get_n(item, "expires_at"),
    )
