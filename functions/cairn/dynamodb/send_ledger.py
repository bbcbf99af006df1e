"""Hand-offs of recorded sends, as attributes of their `email.sent` event item (`HandoffLedger`).

`handoff_lease` (epoch seconds) says a caller is handing the message over
now; `handed_off_at` that the carrier had it, with the outcome it gave at
once (`handoff_outcome`, `provider_message_id`). Both are set with
conditional updates, so two callers never both get the turn. Marking a
hand-off done is retried here on transient trouble: a message the carrier
has must not look unsent to a later retry.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from cairn.dynamodb import keys
from cairn.dynamodb.items import error_code, get_s, key, n, s
from cairn.dynamodb.outbound_items import HANDED_OFF_AT, HANDOFF_LEASE, HANDOFF_OUTCOME, PROVIDER_MESSAGE_ID
from cairn.email.outbound_ports import CARRIER_OUTCOMES, CarrierOutcome, HandoffTurn

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

_FAILED = "ConditionalCheckFailedException"
_DONE_ATTEMPTS = 5


class SendLedger:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def take_turn(self, address_id: str, sequence: int, *, now: float, lease_seconds: float) -> HandoffTurn:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(keys.address_pk(address_id), keys.event_sk(sequence)),
                UpdateExpression="SET #lease = :until",
                ConditionExpression="attribute_exists(pk) AND expires_at > :now_s AND attribute_not_exists(#done)"
                " AND (attribute_not_exists(#lease) OR #lease <= :now)",
                ExpressionAttributeNames={"#lease": HANDOFF_LEASE, "#done": HANDED_OFF_AT},
                ExpressionAttributeValues={
                    ":until": n(round(now + lease_seconds, 3)),
                    ":now": n(round(now, 3)),
                    ":now_s": n(int(now)),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error_code(error) != _FAILED:
                raise
            return _turn_from(error.response.get("Item"), now=now)
        return HandoffTurn("yours")

    def done(
        self,
        address_id: str,
        sequence: int,
        *,
        now: float,
        outcome: CarrierOutcome | None,
        provider_message_id: str | None,
    ) -> None:
        values: dict[str, Any] = {":now": n(round(now, 3))}
        update = "SET #done = :now"
        if outcome is not None:
            update += f", {HANDOFF_OUTCOME} = :outcome"
            values[":outcome"] = s(outcome)
        if provider_message_id is not None:
            update += f", {PROVIDER_MESSAGE_ID} = :provider"
            values[":provider"] = s(provider_message_id)
        for attempt in range(_DONE_ATTEMPTS):
            try:
                self._client.update_item(
                    TableName=self._table,
                    Key=key(keys.address_pk(address_id), keys.event_sk(sequence)),
                    UpdateExpression=update + " REMOVE #lease",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeNames={"#lease": HANDOFF_LEASE, "#done": HANDED_OFF_AT},
                    ExpressionAttributeValues=values,
                )
                return
            except ClientError as error:
                # The address was deleted meanwhile: nothing is left to record.
                if error_code(error) == _FAILED:
                    return
                if attempt == _DONE_ATTEMPTS - 1:
                    raise
            except BotoCoreError:
                if attempt == _DONE_ATTEMPTS - 1:
                    raise
            time.sleep(0.05 * 2**attempt)


def _turn_from(old: Any, *, now: float) -> HandoffTurn:
    """The turn a refused lease reveals: done (with what the carrier said), gone, or another's."""
    if not isinstance(old, dict) or "expires_at" not in old or int(old["expires_at"]["N"]) <= int(now):
        return HandoffTurn("done")
    if HANDED_OFF_AT not in old:
        return HandoffTurn("busy")
    outcome = get_s(old, HANDOFF_OUTCOME)
    return HandoffTurn(
        "done",
        # Only what a carrier said is kept here: the sweep's `outcome_unknown` is never read back as one.
        outcome=outcome if outcome in CARRIER_OUTCOMES else None,
        provider_message_id=get_s(old, PROVIDER_MESSAGE_ID),
    )
