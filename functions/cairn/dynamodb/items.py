"""Tiny helpers for DynamoDB's low-level attribute-value format."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int | float) -> dict[str, str]:
    return {"N": str(int(value)) if float(value).is_integer() else repr(value)}


def b(value: bytes) -> dict[str, bytes]:
    return {"B": value}


def get_s(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name)
    return value["S"] if value else None


def get_n(item: dict[str, Any], name: str) -> float | None:
    value = item.get(name)
    return float(value["N"]) if value else None


def get_int(item: dict[str, Any], name: str, default: int = 0) -> int:
    value = item.get(name)
    return int(value["N"]) if value else default


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)


def to_ms(moment: datetime) -> int:
    """Milliseconds since the epoch; exact for any year the contract can carry."""
    return (moment - _EPOCH) // _MILLISECOND


def from_ms(value: int) -> datetime:
    return _EPOCH + value * _MILLISECOND


def optional_to_ms(moment: datetime | None) -> int:
    """An optional time: 0 stands for none (`ended_at` of a session still open)."""
    return 0 if moment is None else to_ms(moment)


def optional_from_ms(value: int) -> datetime | None:
    return None if not value else from_ms(value)


def key(pk: str, sk: str) -> dict[str, dict[str, str]]:
    return {"pk": s(pk), "sk": s(sk)}


def cancellation_reasons(error: Exception) -> list[dict[str, Any]]:
    """Per-action reasons of a cancelled TransactWriteItems, in action order."""
    response = getattr(error, "response", {}) or {}
    reasons: list[dict[str, Any]] = response.get("CancellationReasons", [])
    return reasons


def error_code(error: Exception) -> str:
    response = getattr(error, "response", {}) or {}
    code: str = response.get("Error", {}).get("Code", "")
    return code
