"""Which values a search filter keeps and which namespaces a listing's conditions keep, as LangGraph's stores do.

A filter maps value fields to what they must be: a plain value is an
equality (a nested object or list compared field by field), an object of
operators (`$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`) compares. The
ordering operators compare numbers; a value that is not a number matches
none of them (LangGraph's in-memory store raises there instead).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from cairn.errors import InvalidRequest
from cairn.graphstore.models import Namespace

_ORDERINGS: dict[str, Callable[[float, float], bool]] = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
OPERATORS = frozenset({"$eq", "$ne", *_ORDERINGS})


def check_filter(conditions: Any) -> None:
    """`InvalidRequest` for an operator no store knows, or one beside a field's name, before anything is read."""
    if isinstance(conditions, dict):
        operators = [name for name in conditions if name.startswith("$")]
        if operators and len(operators) < len(conditions):
            raise InvalidRequest("An object of operators holds operators only, not field names.", field="filter")
        for name, condition in conditions.items():
            if name.startswith("$") and name not in OPERATORS:
                raise InvalidRequest(f"Unknown filter operator {name!r}.", field="filter")
            check_filter(condition)
    elif isinstance(conditions, list):
        for condition in conditions:
            check_filter(condition)


def matches(value: dict[str, Any], conditions: dict[str, Any]) -> bool:
    return all(_compare(value.get(name), condition) for name, condition in conditions.items())


def _compare(found: Any, condition: Any) -> bool:
    if isinstance(condition, dict):
        if any(name.startswith("$") for name in condition):
            return all(_apply(found, operator, operand) for operator, operand in condition.items())
        return isinstance(found, dict) and matches(found, condition)
    if isinstance(condition, list):
        return (
            isinstance(found, list)
            and len(found) == len(condition)
            and all(_compare(item, wanted) for item, wanted in zip(found, condition, strict=True))
        )
    return bool(found == condition)


def _apply(found: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(found == operand)
    if operator == "$ne":
        return bool(found != operand)
    left, right = _number(found), _number(operand)
    return left is not None and right is not None and _ORDERINGS[operator](left, right)


def _number(value: Any) -> int | float | None:
    """A JSON number as it was parsed: Python orders integers and floats exactly against each other, where
    turning an integer past 1e308 into a float would overflow. Anything else (booleans too) is no number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return None if isinstance(value, float) and math.isnan(value) else value


def namespace_matches(namespace: Namespace, path: Namespace, *, at_end: bool) -> bool:
    """Whether `namespace` starts (or, `at_end`, ends) with `path`, where `*` stands for any one label."""
    if len(namespace) < len(path):
        return False
    labels = namespace[len(namespace) - len(path) :] if at_end else namespace[: len(path)]
    return all(wanted in ("*", label) for label, wanted in zip(labels, path, strict=True))
