"""Runtime routes on moto, given what no store can hold or no answer can carry: 4xx answers, never a 5xx."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.runtime import wire
from tests.contract.builders import T0, root_start, run_start
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LAMBDA_ANSWER_LIMIT, LambdaClient, Reply

KEY = "runtime-key"


@pytest.fixture
def api(moto_env, clock: FakeClock) -> LambdaClient:
    return LambdaClient.on_moto(clock, runtime_key=KEY)


def call(api: LambdaClient, method: str, body: Any) -> tuple[Reply, int]:
    return api.sent("POST", f"/api/v1/runtime/{method}", json_body=body, token=KEY)


def test_an_id_longer_than_a_key_is_a_contract_error_not_a_retry_later(api: LambdaClient):
    """DynamoDB refuses it whatever the moment: a 503 with Retry-After had clients send it again forever."""
    reply, _ = call(api, "create_session", {"session_id": "s" * 2100, "created_at": wire.encode(T0)})
    assert (reply.status, reply.error_code) == (422, "contract_error")
    assert "Retry-After" not in reply.headers


def test_a_run_list_too_large_for_one_answer_is_refused_with_413(api: LambdaClient):
    """goa-ai's list of a session's runs has no pages: 27 runs with labels of control characters (7 bytes
    each in an answer) made a 9.8 MB answer, which API Gateway turns into a 502 on every read."""
    assert call(api, "create_session", {"session_id": "session", "created_at": wire.encode(T0)})[0].status == 200
    for n in range(27):
        start = root_start(run_start(f"run-{n}", labels={"k": "\x01" * 50_000}))
        assert call(api, "start_root_run", wire.encode(start))[0].status == 200
    reply, size = call(api, "list_runs_by_session", {"session_id": "session"})
    assert (reply.status, reply.error_code) == (413, "payload_too_large") and size < LAMBDA_ANSWER_LIMIT
    one, _ = call(api, "load_run", {"run_id": "run-0"})
    assert one.status == 200 and one.json()["labels"] == {"k": "\x01" * 50_000}


@pytest.mark.parametrize(
    "body",
    [
        {"session_id": "s", "statuses": ["\U000e0001" * 600_000]},  # an unknown status: 2.4 MB, 7 MB as a repr
        {"session_id": "s", "statuses": [], "\x01" * 1_000_000: 1},  # an unknown field
    ],
    ids=["unknown value", "unknown field"],
)
def test_an_error_names_a_huge_value_in_a_few_characters(api: LambdaClient, body: dict[str, Any]):
    """Echoed whole, the value made an error larger than the request, which the answer turned into a 413."""
    reply, size = call(api, "list_runs_by_session", body)
    assert (reply.status, reply.error_code) == (422, "invalid_request"), reply.text[:300]
    assert size < 1_000


def test_a_map_key_is_named_in_a_few_characters():
    with pytest.raises(wire.WireError) as refused:
        wire.decode(dict[str, str], {"k" * 1_000_000: 1}, "labels")
    assert len(str(refused.value)) < 200
