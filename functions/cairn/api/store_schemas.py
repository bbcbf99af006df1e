"""Wire shapes of the LangGraph store route, used for validation and OpenAPI."""

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from cairn.api.checkpoint_schemas import TEXT
from cairn.api.schemas import Schema
from cairn.graphstore import batches

Label = Annotated[str, Field(min_length=1, max_length=batches.MAX_LABEL, pattern=TEXT)]
Path = Annotated[list[Label], Field(max_length=batches.MAX_DEPTH, description="Namespace labels, outermost first.")]
ItemKey = Annotated[str, Field(max_length=batches.MAX_KEY, pattern=TEXT)]
RefreshTtl = Field(default=True, description="Move the TTL of each item answered on from now (items put with one).")


class GetIn(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    op: Literal["get"]
    namespace: Path
    key: ItemKey
    refresh_ttl: bool = RefreshTtl


class SearchIn(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    op: Literal["search"]
    namespace_prefix: Path = Field(default_factory=list)
    filter: dict[str, Any] = Field(
        default_factory=dict,
        description="Value fields and what they must be: a value (equality, nested objects field by field) "
        "or operators `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte` (the ordering ones compare numbers).",
    )
    query: str | None = Field(
        default=None, max_length=10_000, description="Accepted and ignored: there is no semantic index."
    )
    limit: int = Field(default=10, ge=0, le=batches.MAX_LIMIT)
    offset: int = Field(default=0, ge=0, le=1_000_000)
    refresh_ttl: bool = RefreshTtl


class PutIn(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    op: Literal["put"]
    namespace: Path = Field(min_length=1)
    key: ItemKey
    value: dict[str, Any] | None = Field(description="The item's JSON object; null deletes the item.")
    ttl: float | None = Field(
        default=None,
        ge=batches.MIN_TTL_MINUTES,
        le=batches.MAX_TTL_MINUTES,
        description="Minutes until the item expires (none: with its address).",
    )
    expected_version: int | None = Field(
        default=None,
        ge=0,
        le=2**53,
        description="Commit only while the item is at this version (0: while there is none), else 409 "
        "`store_version_conflict` with `current_version`. Such a put is the only op of its batch.",
    )


class ListNamespacesIn(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    op: Literal["list_namespaces"]
    prefix: Path | None = Field(default=None, description="Namespaces starting with these labels (`*`: any label).")
    suffix: Path | None = Field(default=None, description="Namespaces ending with these labels (`*`: any label).")
    max_depth: int | None = Field(
        default=None, ge=1, le=batches.MAX_DEPTH, description="Cut namespaces to this many labels."
    )
    limit: int = Field(default=100, ge=0, le=batches.MAX_LIMIT)
    offset: int = Field(default=0, ge=0, le=1_000_000)


OpIn = Annotated[GetIn | SearchIn | PutIn | ListNamespacesIn, Field(discriminator="op")]


class StoreBatchRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    ops: list[OpIn] = Field(min_length=1, max_length=batches.MAX_OPS)


class ItemOut(Schema):
    namespace: list[str]
    key: str
    value: dict[str, Any]
    version: int = Field(description="Puts the item has had, from 1: what an `expected_version` names.")
    created_at: str = Field(description="ISO 8601, UTC: the first put (since the item was last absent).")
    updated_at: str = Field(description="ISO 8601, UTC: the last put.")


class GetOut(Schema):
    op: Literal["get"] = "get"
    item: ItemOut | None


class SearchOut(Schema):
    op: Literal["search"] = "search"
    items: list[ItemOut] = Field(description="In storage order: the same for the same items, not key order.")


class PutOut(Schema):
    op: Literal["put"] = "put"
    version: int = Field(description="The item's version now; 0 after a delete.")


class ListNamespacesOut(Schema):
    op: Literal["list_namespaces"] = "list_namespaces"
    namespaces: list[list[str]] = Field(description="Sorted.")


class StoreBatchResponse(Schema):
    results: list[GetOut | SearchOut | PutOut | ListNamespacesOut] = Field(description="One per op, in order.")
