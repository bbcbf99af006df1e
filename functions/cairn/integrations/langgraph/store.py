"""`CairnStore`: LangGraph's `BaseStore` (long-term memory) on an address's store route.

One `batch` is one request: its reads see the store as it was before its
puts, and a plain put is last-writer-wins, as LangGraph's own stores do.
Items put with `ttl` (minutes) are absent once it passes, and reads with
`refresh_ttl` move it on. There is no semantic index: `search` ignores
`query`, as LangGraph's in-memory store does without one.

Write ownership is an extension: `get_versioned` answers an item with its
version, and `put_if_version` commits only while the item is still at the
version read, else `StoreVersionConflict`, so two writers of one item
cannot silently overwrite each other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from cairn.client.address import Address
from cairn.client.http import HttpClient, json_body
from cairn.integrations.settled import settled

# The server's limit (`cairn.graphstore.batches.MAX_OPS`): longer batches travel as several requests.
MAX_OPS = 100


class CairnStore(BaseStore):
    """A LangGraph store whose items live in one Cairn address.

    The address's read token owns them: they go when the address is deleted
    or expires. `ttl` sets the defaults of LangGraph's `TTLConfig`
    (`default_ttl` in minutes, `refresh_on_read`); sweeping is the table's
    own TTL, so `sweep_interval_minutes` is not used.
    """

    supports_ttl = True

    def __init__(self, address: Address, *, ttl: TTLConfig | None = None) -> None:
        self.address = address
        self.ttl_config = ttl
        self._http: HttpClient = address.http
        self._url = f"{address.address_url}/store/batch"
        self._token = address.read_token

    @classmethod
    def connect(cls, base_url: str, address_id: str, read_token: str, **kwargs: Any) -> CairnStore:
        """A store for an address known by id and read token."""
        return cls(Address.connect(base_url, address_id, read_token), **kwargs)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = []
        for start in range(0, len(ops), MAX_OPS):
            chunk = ops[start : start + MAX_OPS]
            answers = self._send([_op_out(op) for op in chunk])
            results.extend(_result_in(op, answer) for op, answer in zip(chunk, answers, strict=True))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        listed = list(ops)
        if any(isinstance(op, PutOp) for op in listed):
            # A cancelled caller hears of it once the puts have settled (`cairn.integrations.settled`).
            return await settled(self.batch, listed)
        return await asyncio.to_thread(self.batch, listed)

    # -- write ownership: an extension of BaseStore ----------------------------

    def get_versioned(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> tuple[Item | None, int]:
        """The item (None: there is none) and its version (0: none), for `put_if_version`."""
        op = GetOp(namespace, str(key), self._refresh(refresh_ttl))
        validate_op_namespace(op)
        (answer,) = self._send([_op_out(op)])
        found = answer["item"]
        return (None, 0) if found is None else (_item(found), int(found["version"]))

    def put_if_version(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any] | None,
        *,
        expected_version: int,
        ttl: float | None | NotProvided = NOT_PROVIDED,
    ) -> int:
        """Put (or, with None, delete) the item only while it is at `expected_version` (0: while there is none).

        Answers the item's version now (0 after a delete); raises
        `StoreVersionConflict`, whose `current_version` is the item's, when
        another writer moved it first. Nothing is stored then.
        """
        op = PutOp(namespace, str(key), value, ttl=self._ttl(ttl))
        validate_op_namespace(op)
        (answer,) = self._send([{**_op_out(op), "expected_version": expected_version}])
        return int(answer["version"])

    async def aget_versioned(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> tuple[Item | None, int]:
        return await asyncio.to_thread(self.get_versioned, namespace, key, refresh_ttl=refresh_ttl)

    async def aput_if_version(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any] | None,
        *,
        expected_version: int,
        ttl: float | None | NotProvided = NOT_PROVIDED,
    ) -> int:
        return await settled(self.put_if_version, namespace, key, value, expected_version=expected_version, ttl=ttl)

    def _refresh(self, refresh_ttl: bool | None) -> bool:
        """As `BaseStore.get` decides: the call's choice, else the TTL config's, else refresh."""
        if refresh_ttl is not None:
            return refresh_ttl
        return (self.ttl_config or {}).get("refresh_on_read", True)

    def _ttl(self, ttl: float | None | NotProvided) -> float | None:
        """As `BaseStore.put` decides: the call's TTL, else the TTL config's default."""
        if isinstance(ttl, NotProvided):
            return (self.ttl_config or {}).get("default_ttl")
        return ttl

    def _send(self, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        answer = self._http.request("POST", self._url, token=self._token, body=json_body({"ops": ops})).json()
        results: list[dict[str, Any]] = answer["results"]
        return results


def _op_out(op: Op) -> dict[str, Any]:
    """An op as the route takes it."""
    if isinstance(op, GetOp):
        return {"op": "get", "namespace": list(op.namespace), "key": op.key, "refresh_ttl": op.refresh_ttl}
    if isinstance(op, SearchOp):
        return {
            "op": "search",
            "namespace_prefix": list(op.namespace_prefix),
            "filter": op.filter or {},
            "limit": op.limit,
            "offset": op.offset,
            "refresh_ttl": op.refresh_ttl,
        }
    if isinstance(op, PutOp):
        return {"op": "put", "namespace": list(op.namespace), "key": op.key, "value": op.value, "ttl": op.ttl}
    if isinstance(op, ListNamespacesOp):
        return _list_namespaces_out(op)
    raise ValueError(f"Unknown operation type: {type(op)}")


def _list_namespaces_out(op: ListNamespacesOp) -> dict[str, Any]:
    wire: dict[str, Any] = {"op": "list_namespaces", "max_depth": op.max_depth, "limit": op.limit, "offset": op.offset}
    for condition in op.match_conditions or ():
        side = condition.match_type
        if side not in ("prefix", "suffix") or side in wire:
            raise ValueError("CairnStore lists namespaces by at most one prefix and one suffix.")
        wire[side] = list(condition.path)
    return wire


def _result_in(op: Op, answer: dict[str, Any]) -> Result:
    if isinstance(op, GetOp):
        return None if answer["item"] is None else _item(answer["item"])
    if isinstance(op, SearchOp):
        return [SearchItem(**_fields(found)) for found in answer["items"]]
    if isinstance(op, ListNamespacesOp):
        return [tuple(namespace) for namespace in answer["namespaces"]]
    return None


def _item(found: dict[str, Any]) -> Item:
    return Item(**_fields(found))


def _fields(found: dict[str, Any]) -> dict[str, Any]:
    return {
        "namespace": tuple(found["namespace"]),
        "key": found["key"],
        "value": found["value"],
        "created_at": datetime.fromisoformat(found["created_at"]),
        "updated_at": datetime.fromisoformat(found["updated_at"]),
    }
