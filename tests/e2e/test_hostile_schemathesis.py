"""Generated hostile input: schemathesis against `/openapi.json` of a running `cairn serve`.

Every operation in the published document is fuzzed with valid and invalid
inputs. Whatever arrives, the answer is never a 5xx and always matches what
the document promises for that status.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from cairn.local.dynamodb_local import DynamoDBLocal
from cairn.settings import Settings
from cairn.store.client import make_client
from cairn.store.table import ensure_table
from tests.support.serve import ServeProcess

# Hypothesis stops early on operations with few distinct inputs (the runtime routes document no
# body), so the richer ones get enough examples to pass 2,000 requests in total.
EXAMPLES_PER_OPERATION = {GenerationMode.POSITIVE: 100, GenerationMode.NEGATIVE: 80}
MINIMUM_CASES = {GenerationMode.POSITIVE: 1_200, GenerationMode.NEGATIVE: 800}
CHECKS = [not_a_server_error, response_schema_conformance]


@pytest.fixture(scope="module")
def fuzzed_server(dynamodb_local: DynamoDBLocal, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One server for every generated case: starting one per operation would cost more than the cases."""
    table = f"cairn-{uuid.uuid4().hex[:12]}"
    ensure_table(make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint)), table)
    workdir: Path = tmp_path_factory.mktemp("fuzz")
    # A one-second long-poll ceiling keeps generated `wait` values from stalling the run.
    env = {"CAIRN_MAX_WAIT_SECONDS": "1"}
    with ServeProcess(workdir, dynamodb_endpoint=dynamodb_local.endpoint, table=table, env=env) as server:
        yield server


@pytest.fixture(scope="module")
def known_address(fuzzed_server: ServeProcess) -> dict:
    """A live address, so valid cases get past authentication and reach the use cases."""
    with fuzzed_server.client() as client:
        reply = client.post("/api/v1/addresses", json={"task_id": "fuzz"})
        assert reply.status_code == 201, reply.text
        created = reply.json()
        inbox = client.post(created["endpoints"]["inbox_url"], json={"type": "seed", "data": {"n": 1}})
        assert inbox.status_code == 202, inbox.text
    return created


@pytest.fixture(scope="module")
def api_schema(fuzzed_server: ServeProcess):
    return schemathesis.openapi.from_url(f"{fuzzed_server.base_url}/openapi.json")


def credentials_for(operation, created: dict) -> dict:
    """Path parameters and headers that aim a valid case at the live address.

    Random ids only ever reach the identical 401; a real id and token let the
    generated bodies, keys and queries through to storage, where bugs hide.
    """
    if operation.method.upper() == "DELETE" and operation.path == "/api/v1/addresses/{address_id}":
        # Deleting the live address would turn every later case into a 401.
        return {}
    path_parameters = {}
    if "{address_id}" in operation.path:
        path_parameters["address_id"] = created["address"]["id"]
    if "{secret}" in operation.path:
        path_parameters["secret"] = created["endpoints"]["inbox_url"].rsplit("/", 1)[-1]
    headers = {"Authorization": f"Bearer {created['credentials']['read_token']}"}
    return {"path_parameters": path_parameters, "headers": headers}


def fuzz(operation, mode: GenerationMode, overrides: dict, base_url: str) -> tuple[int, str | None]:
    """Send generated cases for one operation; the number sent and the first failure, if any."""
    sent = 0

    @given(case=operation.as_strategy(mode, **overrides))
    @settings(
        max_examples=EXAMPLES_PER_OPERATION[mode],
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
    )
    def send(case) -> None:
        nonlocal sent
        sent += 1
        case.call_and_validate(base_url=base_url, checks=CHECKS, timeout=30)

    try:
        send()
    except (FailureGroup, AssertionError) as failure:  # every operation runs; failures are reported together
        return sent, f"{operation.label} ({mode.value}): {failure}"
    except Unsatisfiable:
        # Nothing in the document can be violated (no parameters or body to break): no invalid case exists.
        pass
    return sent, None


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda mode: mode.value)
def test_no_operation_answers_5xx_or_off_schema(
    mode: GenerationMode, api_schema, fuzzed_server: ServeProcess, known_address: dict
):
    total = 0
    failures = []
    for result in api_schema.get_all_operations():
        operation = result.ok()
        overrides = credentials_for(operation, known_address) if mode == GenerationMode.POSITIVE else {}
        sent, failure = fuzz(operation, mode, overrides, fuzzed_server.base_url)
        total += sent
        if failure:
            failures.append(failure)
    assert not failures, "\n\n".join(failures)
    assert total >= MINIMUM_CASES[mode], total
