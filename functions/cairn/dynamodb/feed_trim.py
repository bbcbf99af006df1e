"""The owner's trim of a feed: the oldest events removed, sequences kept.

A trim removes a prefix of the feed, never events from its middle, so the
feed stays one run of sequences: everything at or below the head's
`trimmed_through` is gone, everything above it (and live) is served. The
head is marked first and the items are deleted after, as an address is
deleted: readers skip the marked range at once, and a trim that a fault cut
short is finished by the owner's retry (the sweep also takes items left at
or below the mark). Deleted events free their slots in the feed's quota,
which checks the event a capacity back: it is gone once trimmed.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from cairn.addresses.models import TrimResult
from cairn.dynamodb import blobs, feed_counts, keys, table_ops
from cairn.dynamodb.address_items import DELETED, READ_TOKEN, TRIMMED_THROUGH
from cairn.dynamodb.items import error_code, get_int, get_s, key, n, s
from cairn.errors import Unauthorized, Unavailable

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

_PROJECTION = "pk, sk, seq, expires_at, acknowledged_at, #pieces, #chunks, #legacy_chunks"
_PROJECTION_NAMES = {"#pieces": blobs.PIECES, "#chunks": "chunks", "#legacy_chunks": "data_chunks"}


def trim_feed(
    client: DynamoDBClient,
    table: str,
    address_id: str,
    read_token_digest: str,
    *,
    floor: int,
    counted_from: int,
    through: int,
    include_unacknowledged: bool,
    now: float,
) -> TrimResult:
    """Remove events up to `through` (at most the head's last sequence); see the module docstring.

    Without `include_unacknowledged` the trim stops before the first live
    event not yet acknowledged: that event and all after it stay.
    `floor` is the head's `trimmed_through` as the caller read it; the
    head's counters (`feed_counts`) of sequences from `counted_from` on
    are reduced by what the trim removes, in the update that marks it.
    """
    pk = keys.address_pk(address_id)
    cut = through
    doomed: list[dict[str, Any]] = []
    acknowledged: list[int] = []
    trimmed = 0
    events = table_ops.query_range(
        client,
        table,
        pk,
        keys.event_sk(0),
        keys.event_sk(through),
        ProjectionExpression=_PROJECTION,
        ExpressionAttributeNames=_PROJECTION_NAMES,
    )
    for item in events:
        sequence = get_int(item, "seq")
        live = get_int(item, "expires_at") > now
        if sequence > floor and live and "acknowledged_at" not in item and not include_unacknowledged:
            cut = sequence - 1
            break
        doomed.extend(_item_keys(client, table, item))
        trimmed += live and sequence > floor
        if "acknowledged_at" in item:
            acknowledged.append(sequence)
    cut = max(cut, floor)
    _mark(client, table, pk, read_token_digest, cut, _uncounted(floor, cut, counted_from, acknowledged))
    table_ops.batch_delete(
        client,
        table,
        doomed,
        exhausted=lambda: Unavailable("Trimming is throttled; retry shortly."),
    )
    return TrimResult(trimmed=trimmed, trimmed_through=cut)


def _uncounted(floor: int, cut: int, counted_from: int, acknowledged: list[int]) -> feed_counts.HeadUpdate:
    """Per counted block, the sequences in (`floor`, `cut`] and the acknowledged events among them.

    Every sequence up to the head was appended and counted once, so the
    range itself says how many leave, whether TTL has reaped some or not.
    """
    removed: dict[int, tuple[int, int]] = {}
    for sequence in range(max(floor + 1, counted_from), cut + 1):
        events, acks = removed.get(feed_counts.block_of(sequence), (0, 0))
        removed[feed_counts.block_of(sequence)] = (events + 1, acks)
    for sequence in acknowledged:
        block = feed_counts.block_of(sequence)
        if floor < sequence <= cut and block in removed:
            events, acks = removed[block]
            removed[block] = (events, acks + 1)
    return feed_counts.on_trim(removed)


def _mark(
    client: DynamoDBClient, table: str, pk: str, read_token_digest: str, cut: int, counted: feed_counts.HeadUpdate
) -> None:
    """Raise the head's `trimmed_through` to `cut` (never lower it), under the read token, uncounting what goes."""
    try:
        client.update_item(
            TableName=table,
            Key=key(pk, keys.META),
            UpdateExpression=counted.expression(leading_sets="#trimmed = :cut"),
            ConditionExpression=(
                "#cred = :digest AND attribute_not_exists(#deleted)"
                " AND (attribute_not_exists(#trimmed) OR #trimmed < :cut)"
            ),
            ExpressionAttributeNames={
                "#cred": READ_TOKEN,
                "#deleted": DELETED,
                "#trimmed": TRIMMED_THROUGH,
                **counted.names,
            },
            ExpressionAttributeValues={":digest": s(read_token_digest), ":cut": n(cut), **counted.values},
        )
    except ClientError as error:
        if error_code(error) != "ConditionalCheckFailedException":
            raise
        head = client.get_item(TableName=table, Key=key(pk, keys.META), ConsistentRead=True).get("Item")
        # Only a head already trimmed as far (a retry, or a racing trim) is not a refusal.
        if not head or DELETED in head or not hmac.compare_digest(get_s(head, READ_TOKEN) or "", read_token_digest):
            raise Unauthorized() from error


def _item_keys(client: DynamoDBClient, table: str, event: dict[str, Any]) -> list[dict[str, Any]]:
    """The event item's key and the keys of its payload's pieces, in any layout."""
    pk, sk = event["pk"]["S"], event["sk"]["S"]
    found = [key(pk, sk)]
    if blobs.PIECES in event:
        found += [key(pk, keys.payload_chunk_sk(sk, index)) for index in range(get_int(event, blobs.PIECES))]
    elif blobs.is_split(event):
        legacy = keys.legacy_event_chunk_prefix(get_int(event, "seq"))
        pieces = table_ops.query_prefix(client, table, pk, legacy, ProjectionExpression="pk, sk")
        found += [{"pk": piece["pk"], "sk": piece["sk"]} for piece in pieces]
    return found
