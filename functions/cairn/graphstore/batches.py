"""LangGraph store batches on an address (its read token): get, search, put with TTL, list namespaces.

A batch reads first, then writes, as LangGraph's own stores do: every read
sees the store as it was before the batch, and of two puts to one item the
later one is the one kept. Each put commits on its own; a put that names
the version it read (`expected_version`, an extension of LangGraph's
`PutOp`) travels alone, so a refused batch changed nothing. An item whose
TTL has passed is absent to every read at once; it is removed, and its room
given back, when a put finds the address's storage full.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import TypeVar

from cairn import jsontext
from cairn.addresses.ports import AddressStore
from cairn.checkpoints.models import Owner, owner_of
from cairn.clock import Clock
from cairn.errors import InvalidRequest, PayloadTooLarge
from cairn.graphstore import matching
from cairn.graphstore.models import GetOp, ListNamespacesOp, Namespace, Op, PutOp, Result, SearchOp, StoredItem
from cairn.graphstore.ports import GraphStoreItems

MAX_OPS = 100
# The most items (or namespaces) one batch's searches and namespace listings may read between them.
MAX_SCANNED_ITEMS = 100_000

T = TypeVar("T")
MAX_DEPTH = 16
MAX_LABEL = 256
MAX_KEY = 1024
MAX_LIMIT = 1000
# A TTL DynamoDB can store as a number (it takes none below 1e-130), up to ten years.
MIN_TTL_MINUTES = 0.001
MAX_TTL_MINUTES = 5_256_000
# A value as canonical JSON; values above one item's room are stored in pieces beside it.
MAX_VALUE_BYTES = 1_000_000
# What one answer carries as Lambda writes it (`jsontext.sent_size`), below Lambda's 6 MB.
ANSWER_BUDGET = 4_000_000
# An item's field names, version and times in an answer; a namespace's place in a list.
_ITEM_OVERHEAD = 200
_NAMESPACE_OVERHEAD = 2


class GraphStore:
    def __init__(self, addresses: AddressStore, items: GraphStoreItems, clock: Clock) -> None:
        self._addresses = addresses
        self._items = items
        self._clock = clock

    def batch(self, address_id: str, read_token: str | None, ops: Sequence[Op]) -> list[Result]:
        """Each op's result, in order; reads see the store as it was before the batch's puts."""
        _check(ops)
        now = self._clock()
        owner = owner_of(self._addresses, address_id, read_token, now=now)
        results = self._reads(address_id, ops, now)
        self._refresh(owner, ops, results, now)
        self._puts(owner, ops, results, now)
        return results

    def _reads(self, address_id: str, ops: Sequence[Op], now: float) -> list[Result]:
        """The results of the batch's reads, in place; None where its puts go."""
        results: list[Result] = [None] * len(ops)
        budget = _AnswerBudget()
        for index, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[index] = self._get(address_id, op, now, budget)
            elif isinstance(op, SearchOp):
                results[index] = self._search(address_id, op, now, budget)
            elif isinstance(op, ListNamespacesOp):
                results[index] = self._namespaces(address_id, op, now, budget)
        return results

    def _refresh(self, owner: Owner, ops: Sequence[Op], results: list[Result], now: float) -> None:
        """Move the TTL of every item a refreshing read answered, once the answer is known to fit."""
        for op, result in zip(ops, results, strict=True):
            if isinstance(op, GetOp | SearchOp) and op.refresh_ttl:
                for item in _found(result):
                    if item.ttl_minutes is not None:
                        self._items.refresh(owner, item, now=now)

    def _puts(self, owner: Owner, ops: Sequence[Op], results: list[Result], now: float) -> None:
        """The last put of each item, committed; every put of it answers the version it left."""
        last = {(op.namespace, op.key): op for op in ops if isinstance(op, PutOp)}
        versions = {target: self._items.put(owner, put, now=now) for target, put in last.items()}
        for index, op in enumerate(ops):
            if isinstance(op, PutOp):
                results[index] = versions[(op.namespace, op.key)]

    def _get(self, address_id: str, op: GetOp, now: float, budget: _AnswerBudget) -> StoredItem | None:
        item = self._items.get(address_id, op.namespace, op.key)
        return None if item is None or item.expired(now) else budget.take_item(item)

    def _search(self, address_id: str, op: SearchOp, now: float, budget: _AnswerBudget) -> list[StoredItem]:
        found = (
            item
            for item in budget.scanned(self._items.under(address_id, op.namespace_prefix))
            if not item.expired(now) and matching.matches(item.value, op.filter)
        )
        return [budget.take_item(item) for item in islice(found, op.offset, op.offset + op.limit)]

    def _namespaces(self, address_id: str, op: ListNamespacesOp, now: float, budget: _AnswerBudget) -> list[Namespace]:
        # A prefix without wildcards narrows the read; one with them is matched label by label.
        fixed = op.prefix if op.prefix is not None and "*" not in op.prefix else ()
        found: set[Namespace] = set()
        for namespace, expires_at in budget.scanned(self._items.namespaces(address_id, fixed)):
            if expires_at is not None and expires_at <= now:
                continue
            if op.prefix is not None and not matching.namespace_matches(namespace, op.prefix, at_end=False):
                continue
            if op.suffix is not None and not matching.namespace_matches(namespace, op.suffix, at_end=True):
                continue
            found.add(namespace if op.max_depth is None else namespace[: op.max_depth])
        return [budget.take_namespace(namespace) for namespace in sorted(found)[op.offset : op.offset + op.limit]]


def _check(ops: Sequence[Op]) -> None:
    """Every op checked before any runs, so a refused batch changes nothing."""
    if not 0 < len(ops) <= MAX_OPS:
        raise InvalidRequest(f"Send 1 to {MAX_OPS} ops at once.", field="ops")
    for op in ops:
        if isinstance(op, PutOp):
            _check_put(op, alone=len(ops) == 1)
        elif isinstance(op, SearchOp):
            matching.check_filter(op.filter)


def _check_put(op: PutOp, *, alone: bool) -> None:
    if not op.namespace:
        raise InvalidRequest("A put names a namespace of at least one label.", field="namespace")
    if op.expected_version is not None and not alone:
        raise InvalidRequest("A put with expected_version is the only op of its batch.", field="expected_version")
    if op.value is not None and len(jsontext.canonical(op.value).encode()) > MAX_VALUE_BYTES:
        raise PayloadTooLarge(f"A value takes at most {MAX_VALUE_BYTES} bytes as JSON.", max_bytes=MAX_VALUE_BYTES)


class _AnswerBudget:
    """What the items and namespaces of one answer may take, escaped as Lambda carries them (quotes and
    backslashes twice, other than ASCII as `\\uXXXX`): reading stops at the first that would not fit.

    It also counts the items the batch's searches and namespace listings read, kept or not: a filter that
    matches nothing, or an offset past the end, costs its reads too, and a hundred such searches had
    read a full address a hundred times in one request.
    """

    def __init__(self) -> None:
        self._left = ANSWER_BUDGET
        self._scans_left = MAX_SCANNED_ITEMS

    def scanned(self, items: Iterable[T]) -> Iterator[T]:
        """`items`, each counted against what one batch may read."""
        for item in items:
            self._scans_left -= 1
            if self._scans_left < 0:
                raise PayloadTooLarge(
                    f"The batch's searches read more than {MAX_SCANNED_ITEMS:,} items: search narrower namespaces "
                    "(namespace_prefix), or fewer at once.",
                    max_scanned_items=MAX_SCANNED_ITEMS,
                )
            yield item

    def take_item(self, item: StoredItem) -> StoredItem:
        self._spend(jsontext.value_sent_size([list(item.namespace), item.key, item.value]) + _ITEM_OVERHEAD)
        return item

    def take_namespace(self, namespace: Namespace) -> Namespace:
        self._spend(jsontext.value_sent_size(list(namespace)) + _NAMESPACE_OVERHEAD)
        return namespace

    def _spend(self, size: int) -> None:
        self._left -= size
        if self._left < 0:
            raise PayloadTooLarge("What the batch found does not fit one answer: ask for fewer at once (limit).")


def _found(result: Result) -> list[StoredItem]:
    """The items a read answered."""
    if isinstance(result, StoredItem):
        return [result]
    return [item for item in result if isinstance(item, StoredItem)] if isinstance(result, list) else []
