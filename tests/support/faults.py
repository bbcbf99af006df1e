"""Storage faults at the Nth DynamoDB call of one operation.

A botocore hook on the service's own client fails the Nth call, for every N,
with each kind of failure AWS can hand back. Hooks raise outside botocore's
own retry loop, so every fault reaches Cairn's code whatever the client's
retry settings.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from cairn.dynamodb.client import make_client
from cairn.dynamodb.table import ensure_table
from cairn.dynamodb.waiters import NotifyingWaiter
from cairn.services import Services
from cairn.settings import Settings
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, Reply

# Each kind of failure, injected at every call of every operation. DynamoDB says "too many requests"
# with two codes that every layer treats alike: `throttling` answers one at odd calls and the other at
# even ones, so each operation of more than one call meets both (`BUSY_CODES` meets every such code).
FAULTS = ("throttling", "transaction_conflict", "network", "timeout_after_commit")
# Every code with which DynamoDB answers "busy or unavailable, ask again", as a fault kind of its own.
BUSY_CODES = (
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "TransactionInProgressException",
    "InternalServerError",
    "ServiceUnavailable",
    "LimitExceededException",
)
RUNTIME_KEY = "fault-key"


def injected_error(kind: str, operation: str, request: dict[str, Any], at: int) -> Exception:
    """The exception DynamoDB (or the network) would raise for this serialized request, the `at`-th call.

    A kind that names none of `FAULTS` is a DynamoDB error code, raised as it is.
    """
    if kind == "network":
        return EndpointConnectionError(endpoint_url="http://dynamodb.invalid")
    if kind == "transaction_conflict" and operation == "TransactWriteItems":
        # A real conflict names the one contended item; the others say None.
        reasons = [{"Code": "None"} for _ in json.loads(request["body"])["TransactItems"]]
        reasons[-1] = {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
        return client_error("TransactionCanceledException", operation, CancellationReasons=reasons)
    if kind == "throttling":
        return client_error("ThrottlingException" if at % 2 else "ProvisionedThroughputExceededException", operation)
    if kind == "transaction_conflict":
        return client_error("TransactionConflictException", operation)
    return client_error(kind, operation)


def client_error(code: str, operation: str, **extra: Any) -> ClientError:
    response = {"Error": {"Code": code, "Message": "injected"}, "ResponseMetadata": {"HTTPStatusCode": 400}, **extra}
    return ClientError(response, operation)


class FaultInjector:
    """Counts the DynamoDB calls of one client and fails the Nth, once.

    `timeout_after_commit` lets the real call succeed and then loses its
    answer, the way a read timeout does after DynamoDB has applied a write.
    """

    def __init__(self, client) -> None:
        self.calls = 0
        self.fired = False
        self._kind: str | None = None
        self._at = 0
        client.meta.events.register("before-call.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def arm(self, kind: str | None = None, at: int = 0) -> None:
        """Start counting from zero; with a kind, fail call number `at`."""
        self.calls = 0
        self.fired = False
        self._kind = kind
        self._at = at

    def disarm(self) -> None:
        self._kind = None

    def _before(self, model, params, **_: Any) -> None:
        self.calls += 1
        if self._kind is None or self._kind == "timeout_after_commit" or self.calls != self._at:
            return
        self.fired = True
        raise injected_error(self._kind, model.name, params, self._at)

    def _after(self, http_response, **_: Any) -> None:
        if self._kind != "timeout_after_commit" or self.calls != self._at or http_response.status_code >= 300:
            return
        self.fired = True
        raise ReadTimeoutError(endpoint_url="http://dynamodb.invalid")


def faulty_api(endpoint: str, **overrides: Any) -> tuple[LambdaClient, FaultInjector]:
    """The API resolver on a fresh DynamoDB Local table whose one client carries the injector."""
    table = f"cairn-faults-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        table_name=table,
        dynamodb_endpoint=endpoint,
        poll_rate_per_minute=10_000,
        create_rate_per_minute=10_000,
        runtime_key=RUNTIME_KEY,
        **overrides,
    )
    client = make_client(settings)
    ensure_table(client, table, stream=False)
    injector = FaultInjector(client)
    services = Services.build(settings, client=client, waiter=NotifyingWaiter(), clock=FakeClock())
    return LambdaClient(services), injector


def calls_made(injector: FaultInjector, action: Callable[[], Any]) -> int:
    """How many DynamoDB calls `action` makes when nothing fails."""
    injector.arm()
    action()
    return injector.calls


def assert_success_or_retryable(reply: Reply) -> None:
    if reply.status < 300:
        return
    assert reply.status == 503, reply.text
    assert reply.error_code == "temporarily_unavailable"
    assert reply.headers.get("Retry-After") == "1"
