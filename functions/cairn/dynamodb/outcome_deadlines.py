"""Deadlines of reserved outcome slots, in the `OUTCOME#DUE` partition (`OutcomeDeadlines`).

A send's append puts its deadline item (`deadline_put`) in the same
transaction that reserves the slot; the outcome sweep reads the items whose
deadline passed, earliest first, and deletes each once it has settled it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cairn.addresses.models import EventRef
from cairn.addresses.ports import OutcomeDeadline
from cairn.dynamodb import keys
from cairn.dynamodb.items import get_int, get_s, key, n, s
from cairn.email.outbound_ports import DueOutcome

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

# TTL is a last resort for an item no sweep could settle in this long after its deadline; the sweep
# removes every other within minutes of it.
_KEPT_AFTER_DEADLINE_SECONDS = 7 * 86_400
# Which hand-off attempt of the send the slot is for; absent for the first.
_ATTEMPT = "attempt"


def deadline_put(table: str, address_id: str, send: EventRef, deadline: OutcomeDeadline) -> dict[str, Any]:
    """The transaction action that stores the deadline of the outcome slot `send` reserves."""
    item = {
        **key(keys.OUTCOME_DUE_PK, keys.outcome_due_sk(deadline.at, address_id, send.sequence, deadline.attempt)),
        "address_id": s(address_id),
        "send_event_id": s(send.id),
        "message_id": s(deadline.message_id),
        "expires_at": n(int(deadline.at) + _KEPT_AFTER_DEADLINE_SECONDS),
    }
    if deadline.attempt > 1:
        item[_ATTEMPT] = n(deadline.attempt)
    return {"Put": {"TableName": table, "Item": item}}


class OutcomeDeadlineTable:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def due(self, now: float, limit: int) -> list[DueOutcome]:
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND sk < :upper",
            ExpressionAttributeValues={":pk": s(keys.OUTCOME_DUE_PK), ":upper": s(keys.due_upper_bound(now))},
            Limit=limit,
        )
        return [
            DueOutcome(
                address_id=get_s(item, "address_id") or "",
                send_event_id=get_s(item, "send_event_id") or "",
                message_id=get_s(item, "message_id"),
                token=get_s(item, "sk") or "",
                attempt=get_int(item, _ATTEMPT, 1),
            )
            for item in response.get("Items", [])
        ]

    def done(self, item: DueOutcome) -> None:
        self._client.delete_item(TableName=self._table, Key=key(keys.OUTCOME_DUE_PK, item.token))
