"""Tiny helpers for DynamoDB's low-level attribute-value format."""

from __future__ import annotations

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


def key(pk: str, sk: str) -> dict[str, dict[str, str]]:
    return {"pk": s(pk), "sk": s(sk)}


def cancellation_reasons(error: Exception) -> list[dict[str, Any]]:
    """Per-action reasons of a cancelled TransactWriteItems, in action order."""
    response = getattr(error, "response", {}) or {}
    return response.get("CancellationReasons", [])


def error_code(error: Exception) -> str:
    response = getattr(error, "response", {}) or {}
    return response.get("Error", {}).get("Code", "")
