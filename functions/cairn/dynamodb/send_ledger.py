"""Hand-offs of recorded sends, as attributes of their `email.sent` event item (`HandoffLedger`).

`handoff_lease` (epoch seconds) says a caller is handing the message over
now; `handed_off_at` that the carrier had it, with the outcome it gave at
once (`handoff_outcome`, `provider_message_id`; `failed` when it refused),
all of the attempt `handoff_attempt` names (absent for the first). Each is
set with a conditional update, so two callers never both get the turn. A
retry opens the next attempt of a refused one with `retry_action`, inside
the commit that reserves that attempt's outcome slot. Marking a hand-off
done is retried here on transient trouble: a message the carrier has must
not look unsent to a later retry.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from cairn.addresses.ports import RetriedHandoff
from cairn.dynamodb import keys
from cairn.dynamodb.items import error_code, get_int, get_s, key, n, s
from cairn.dynamodb.outbound_items import (
    HANDED_OFF_AT,
    HANDOFF_ATTEMPT,
    HANDOFF_LEASE,
    HANDOFF_OUTCOME,
    PROVIDER_MESSAGE_ID,
)
from cairn.email.outbound_ports import CARRIER_OUTCOMES, CarrierOutcome, Handoff, HandoffTurn

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
            taken = self._client.update_item(
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
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error_code(error) != _FAILED:
                raise
            return _turn_from(error.response.get("Item"), now=now)
        return HandoffTurn("yours", attempt=get_int(taken.get("Attributes", {}), HANDOFF_ATTEMPT, 1))

    def done(self, address_id: str, sequence: int, handoff: Handoff, *, now: float, attempt: int) -> None:
        self._record(
            address_id,
            sequence,
            now=now,
            attempt=attempt,
            outcome=handoff.outcome,
            provider_message_id=handoff.provider_message_id,
        )

    def refused(self, address_id: str, sequence: int, *, now: float, attempt: int) -> None:
        self._record(address_id, sequence, now=now, attempt=attempt, outcome="failed", provider_message_id=None)

    def _record(
        self,
        address_id: str,
        sequence: int,
        *,
        now: float,
        attempt: int,
        outcome: CarrierOutcome | None,
        provider_message_id: str | None,
    ) -> None:
        """Mark the hand-off done with what the carrier said, retried on transient trouble."""
        values: dict[str, Any] = {":now": n(round(now, 3))}
        # Only while `attempt` is the send's last: a caller whose lease ran out never overwrites a later one.
        condition = "attribute_exists(pk) AND " + _is_attempt(attempt, values)
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
                    ConditionExpression=condition,
                    ExpressionAttributeNames={
                        "#lease": HANDOFF_LEASE,
                        "#done": HANDED_OFF_AT,
                        "#attempt": HANDOFF_ATTEMPT,
                    },
                    ExpressionAttributeValues=values,
                )
                return
            except ClientError as error:
                # The address was deleted meanwhile, or a later attempt began: nothing is left to record.
                if error_code(error) == _FAILED:
                    return
                if attempt == _DONE_ATTEMPTS - 1:
                    raise
            except BotoCoreError:
                if attempt == _DONE_ATTEMPTS - 1:
                    raise
            time.sleep(0.05 * 2**attempt)


def retry_action(
    table: str, address_id: str, retried: RetriedHandoff, *, now: float, feed_quota: bool = False
) -> dict[str, Any]:
    """The transaction action that opens the attempt after `retried`, leased to the caller.

    It passes only while the send is retained and its last attempt is
    `retried.attempt`, refused: of two retries racing, one opens the next
    attempt and the other's commit (with the slot it would reserve) fails.
    `feed_quota`: the send is also the event whose presence says the feed is
    full (one item takes one action), so the quota's condition joins this
    one, and the two cannot both hold.
    """
    values: dict[str, Any] = {
        ":until": n(round(retried.lease_until, 3)),
        ":next": n(retried.attempt + 1),
        ":failed": s("failed"),
        ":now_s": n(int(now)),
    }
    return {
        "Update": {
            "TableName": table,
            "Key": key(keys.address_pk(address_id), keys.event_sk(retried.sequence)),
            "UpdateExpression": "SET #lease = :until, #attempt = :next REMOVE #done, #outcome, #provider",
            "ConditionExpression": "attribute_exists(pk) AND expires_at > :now_s AND #outcome = :failed AND "
            + _is_attempt(retried.attempt, values)
            + (" AND (attribute_not_exists(pk) OR expires_at <= :now_s)" if feed_quota else ""),
            "ExpressionAttributeNames": {
                "#lease": HANDOFF_LEASE,
                "#attempt": HANDOFF_ATTEMPT,
                "#done": HANDED_OFF_AT,
                "#outcome": HANDOFF_OUTCOME,
                "#provider": PROVIDER_MESSAGE_ID,
            },
            "ExpressionAttributeValues": values,
        }
    }


def _is_attempt(attempt: int, values: dict[str, Any]) -> str:
    """The condition that the send's last hand-off attempt is `attempt` (the first has no number stored)."""
    if attempt == 1:
        return "attribute_not_exists(#attempt)"
    values[":attempt"] = n(attempt)
    return "#attempt = :attempt"


def _turn_from(old: Any, *, now: float) -> HandoffTurn:
    """The turn a refused lease reveals: done (with what the carrier said), gone, or another's."""
    if not isinstance(old, dict) or "expires_at" not in old or int(old["expires_at"]["N"]) <= int(now):
        return HandoffTurn("done")
    attempt = get_int(old, HANDOFF_ATTEMPT, 1)
    if HANDED_OFF_AT not in old:
        return HandoffTurn("busy", attempt=attempt)
    outcome = get_s(old, HANDOFF_OUTCOME)
    return HandoffTurn(
        "done",
        # Only what a carrier said is kept here: the sweep's `outcome_unknown` is never read back as one.
        outcome=outcome if outcome in CARRIER_OUTCOMES else None,
        provider_message_id=get_s(old, PROVIDER_MESSAGE_ID),
        attempt=attempt,
    )
