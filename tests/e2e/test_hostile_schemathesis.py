"""Generated hostile input: schemathesis against `/openapi.json` of a running `cairn serve`.

Every operation in the published document is fuzzed with valid and invalid
inputs, then sequences of valid calls follow links (a session's id into the
calls that use it, a started run into its records, terminal and product
memory, an address's id and token into its routes). Whatever arrives, the
answer is never a 5xx and always matches what the document promises for that
status.
"""

from __future__ import annotations

import base64
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Flaky, Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from cairn.runtime.methods import METHODS
from tests.support.serve import ServeProcess
from tests.support.tables import RunTables

# How deep the run goes: 1 in `make test`, more in `make fuzz` (which also draws new cases each run,
# where `make test` replays the same ones).
DEPTH = float(os.environ.get("CAIRN_FUZZ_DEPTH", "1"))
FRESH_CASES = os.environ.get("CAIRN_FUZZ_FRESH") == "1"


def deep(count: int) -> int:
    return max(1, round(count * DEPTH))


# Hypothesis stops early on operations with few distinct inputs, so the richer ones get enough
# examples to pass the minimum in total. The 21 runtime routes share their shapes (records, run
# starts), so each gets fewer than the other routes and the run stays bounded.
EXAMPLES_PER_OPERATION = {GenerationMode.POSITIVE: deep(20), GenerationMode.NEGATIVE: deep(16)}
EXAMPLES_PER_RUNTIME_OPERATION = {GenerationMode.POSITIVE: deep(8), GenerationMode.NEGATIVE: deep(6)}
MINIMUM_CASES = {GenerationMode.POSITIVE: deep(400), GenerationMode.NEGATIVE: deep(240)}
MINIMUM_CASES_PER_RUNTIME_OPERATION = {GenerationMode.POSITIVE: deep(8), GenerationMode.NEGATIVE: deep(6)}
RUNTIME_PREFIX = "/api/v1/runtime/"
WORKER_PREFIXES = (RUNTIME_PREFIX, "/api/v1/memory/")
CHECKS = [not_a_server_error, response_schema_conformance]
# Linked sequences: rounds of scenarios of up to this many calls each, until every group has
# followed enough links.
ROUNDS = 10
SCENARIOS = deep(20)
STEPS_PER_SCENARIO = 15
LINKED_GROUPS = {"addresses": "^/api/v1/(addresses|inbox)", "runtime": "^/api/v1/(runtime|memory)/"}
LINKED_TARGETS = {
    "addresses": [
        "POST /api/v1/addresses/{address_id}/state",
        "PUT /api/v1/addresses/{address_id}/state/{key}",
        "GET /api/v1/addresses/{address_id}/events",
        "POST /api/v1/inbox/{address_id}/{secret}",
    ],
    "runtime": [
        "POST /api/v1/runtime/load_session",
        "POST /api/v1/runtime/start_root_run",
        "POST /api/v1/runtime/append_run_record",
        "POST /api/v1/runtime/record_run_terminal",
        "POST /api/v1/memory/{agent_id}/runs/{run_id}/events",
    ],
}
# Rounds go on until each target was reached this often through a link (or ROUNDS run out);
# which links Hypothesis picks varies with what the server already holds, so the assertion
# asks only that each target was reached through a link at all.
MINIMUM_LINKED_STEPS = deep(3)
# Memory ids are checked by the store; valid ones let generated events reach the table.
MEMORY_IDS = {"agent_id": "fuzz.agent", "run_id": "fuzz-run"}


@pytest.fixture(scope="module")
def fuzzed_server(run_tables: RunTables, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One server for every generated case: starting one per operation would cost more than the cases."""
    table = run_tables.streamed()
    workdir: Path = tmp_path_factory.mktemp("fuzz")
    # A one-second long-poll ceiling keeps generated `wait` values from stalling the run.
    env = {"CAIRN_MAX_WAIT_SECONDS": "1"}
    with ServeProcess(workdir, dynamodb_endpoint=run_tables.database.endpoint, table=table, env=env) as server:
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


def credentials_for(operation, created: dict, worker: dict[str, str]) -> dict:
    """Path parameters and headers that aim a valid case at the live address (and at one memory run).

    Random ids only ever reach the identical 401 (or 400 for memory ids); a
    real id and token let the generated bodies, keys and queries through to
    storage, where bugs hide.
    """
    if operation.method.upper() == "DELETE" and operation.path == "/api/v1/addresses/{address_id}":
        # Deleting the live address would turn every later case into a 401.
        return {}
    path_parameters = {name: value for name, value in MEMORY_IDS.items() if f"{{{name}}}" in operation.path}
    if "{address_id}" in operation.path:
        path_parameters["address_id"] = created["address"]["id"]
    if "{secret}" in operation.path:
        path_parameters["secret"] = created["endpoints"]["inbox_url"].rsplit("/", 1)[-1]
    headers = (
        worker if is_worker_route(operation) else {"Authorization": f"Bearer {created['credentials']['read_token']}"}
    )
    return {"path_parameters": path_parameters, "headers": headers}


def is_worker_route(operation) -> bool:
    """The runtime and memory routes, which take the runtime key instead of an address token."""
    return operation.path.startswith(WORKER_PREFIXES)


def fuzz(
    operation, mode: GenerationMode, overrides: dict, base_url: str, session: requests.Session
) -> tuple[int, str | None]:
    """Send generated cases for one operation; the number sent and the first failure, if any."""
    sent = 0
    runtime = operation.path.startswith(RUNTIME_PREFIX)

    @given(case=operation.as_strategy(mode, **overrides))
    @settings(
        max_examples=(EXAMPLES_PER_RUNTIME_OPERATION if runtime else EXAMPLES_PER_OPERATION)[mode],
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=not FRESH_CASES,
        database=None,
        phases=[Phase.explicit, Phase.generate],
    )
    def send(case) -> None:
        nonlocal sent
        sent += 1
        case.call_and_validate(base_url=base_url, session=session, checks=CHECKS, timeout=30)

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
    sent_by_operation: Counter[str] = Counter()
    failures = []
    started = time.monotonic()
    # One connection for every case (the server keeps it open), as a client would: a new one each
    # time cost both sides a connection's set-up per case.
    session = requests.Session()
    for result in api_schema.get_all_operations():
        operation = result.ok()
        worker = fuzzed_server.worker_headers
        if mode == GenerationMode.POSITIVE:
            overrides = credentials_for(operation, known_address, worker)
        else:
            # Invalid cases still carry the runtime key, so they reach the decoders rather than its check.
            overrides = {"headers": worker} if is_worker_route(operation) else {}
        sent, failure = fuzz(operation, mode, overrides, fuzzed_server.base_url, session)
        sent_by_operation[operation.path] += sent
        if failure:
            failures.append(failure)
    report_counts(f"{mode.value} cases", sent_by_operation, time.monotonic() - started)
    assert not failures, "\n\n".join(failures)
    assert sum(sent_by_operation.values()) >= MINIMUM_CASES[mode], sent_by_operation
    runtime = {path: sent for path, sent in sent_by_operation.items() if path.startswith(RUNTIME_PREFIX)}
    assert len(runtime) == len(METHODS)
    assert min(runtime.values()) >= MINIMUM_CASES_PER_RUNTIME_OPERATION[mode], runtime


def group_of(path: str) -> str:
    """`runtime`, `memory`, `addresses`, …: the part of the API a path belongs to."""
    return path.removeprefix("/api/v1/").strip("/").split("/", 1)[0]


def report_counts(title: str, counts: Counter[str], seconds: float) -> None:
    by_group: Counter[str] = Counter()
    for path, sent in counts.items():
        by_group[group_of(path)] += sent
    print(f"\n{title} in {seconds:.1f}s: {dict(sorted(by_group.items()))}")


def address_links(document: dict) -> dict:
    """Links from a provisioned address to the routes it unlocks: its id as the path, its token as the bearer.

    The address routes publish no links, so this test adds them to the fetched document.
    """
    address = {
        "path.address_id": "$response.body#/address/id",
        "header.Authorization": "Bearer {$response.body#/credentials/read_token}",
    }
    secret = {"path.secret": "$response.body#/endpoints/inbox_url#regex:/([^/]+)$"}
    links = {}
    for path, operations in document["paths"].items():
        if not path.startswith(("/api/v1/addresses/{address_id}", "/api/v1/inbox/{address_id}/")):
            continue
        for method, operation in operations.items():
            if method == "delete" and path == "/api/v1/addresses/{address_id}":
                continue  # the other links need the address alive
            parameters = {**address, **(secret if "{secret}" in path else {})}
            links[operation["operationId"]] = {"operationId": operation["operationId"], "parameters": parameters}
    return links


def encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def run_scenario_links() -> dict[str, dict]:
    """Complete, valid commands for the links the document publishes with ids only.

    Random records rarely agree with their run (same ids, a payload of the right shape), so
    these carry whole commands: a root run in the session just created, then a note, a
    terminal and product memory for that run. The fuzzer still mixes in generated fields.
    """
    of_run = {
        "run_id": "$request.body#/run/run_id",
        "agent_id": "$request.body#/run/agent_id",
        "session_id": "$request.body#/run/session_id",
        "turn_id": "",
        "id": "",
    }
    session = "$response.body#/id"
    # Session ids are any text; the session's creation time makes a run id memory accepts too.
    ids = {"agent_id": MEMORY_IDS["agent_id"], "run_id": "run-{$response.body#/created_at}", "session_id": session}
    start = {
        "request_digest": encoded("d" * 32),
        "run": {
            **ids,
            "started_at": "2026-11-29T12:00:00.123Z",
            "seed_end_id": "",
            "parent_run_id": "",
            "predecessor_run_id": "",
            "labels": {},
        },
        "started": {
            **ids,
            "event_key": "started",
            "type": "run_started",
            "payload": encoded("{}"),
            "timestamp": "2026-11-29T12:00:00.123Z",
            "turn_id": "",
            "id": "",
        },
        "cancellation": {
            **ids,
            "event_key": "stopped",
            "type": "runtime.cancellation_intent",
            "payload": encoded('{"reason":"session_ended"}'),
            "timestamp": "2026-11-29T12:00:00.123Z",
            "turn_id": "",
            "id": "",
        },
    }
    note = {
        **of_run,
        "event_key": "note",
        "type": "assistant_message",
        "payload": encoded('{"text":"hi"}'),
        "timestamp": "2026-11-29T12:00:00.500Z",
    }
    completed = encoded('{"status":"success","phase":"completed"}')
    terminal = {
        "run_id": of_run["run_id"],
        "status": "completed",
        "record": {
            **of_run,
            "event_key": "terminal",
            "type": "run_completed",
            "payload": completed,
            "timestamp": "2026-11-29T12:00:01.000Z",
        },
    }
    memory = {
        "operationId": "memory_append",
        "parameters": {"path.agent_id": of_run["agent_id"], "path.run_id": of_run["run_id"]},
    }
    return {
        "runtime_create_session": {
            "ScenarioStartRootRun": {"operationId": "runtime_start_root_run", "requestBody": start}
        },
        "runtime_start_root_run": {
            "ScenarioNote": {"operationId": "runtime_append_run_record", "requestBody": note},
            "ScenarioTerminal": {"operationId": "runtime_record_run_terminal", "requestBody": terminal},
            "ScenarioMemory": memory,
        },
        # Product memory is written beside a run's records: after a note, for the same run.
        "runtime_append_run_record": {
            "ScenarioMemoryAfterNote": {
                "operationId": "memory_append",
                "parameters": {"path.agent_id": "$request.body#/agent_id", "path.run_id": "$request.body#/run_id"},
            },
        },
    }


@pytest.fixture(scope="module")
def linked_document(fuzzed_server: ServeProcess) -> dict:
    """The served document, with the links this test adds (see `address_links` and `run_scenario_links`)."""
    with fuzzed_server.client() as client:
        document = client.get("/openapi.json").json()
    provision = document["paths"]["/api/v1/addresses"]["post"]["responses"]["201"]
    provision["links"] = address_links(document)
    for operation_id, links in run_scenario_links().items():
        success = document["paths"][RUNTIME_PREFIX + operation_id.removeprefix("runtime_")]["post"]["responses"]
        success["200"].setdefault("links", {}).update(links)
    return document


@pytest.mark.parametrize("group", LINKED_GROUPS)
def test_linked_sequences_answer_no_5xx_and_stay_on_schema(
    group: str, linked_document: dict, fuzzed_server: ServeProcess
):
    """Scenarios of linked calls, in rounds until each link that matters was followed a few times."""
    schema = schemathesis.openapi.from_dict(linked_document).include(path_regex=LINKED_GROUPS[group])
    # Only the document's links, and only valid inputs: invalid ones are the per-operation test's
    # job, and a chain only goes on after a success.
    schema.config.phases.stateful.inference.algorithms = []
    schema.config.generation.update(modes=[GenerationMode.POSITIVE])
    linked_steps: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    failures: list[str] = []
    base_url = fuzzed_server.base_url
    headers = fuzzed_server.worker_headers if group == "runtime" else {}

    class LinkedCalls(schema.as_state_machine()):
        def step(self, input):
            calls[input.case.operation.path] += 1
            if input.transition is not None:
                linked_steps[input.transition.id.rsplit(" -> ", 1)[-1]] += 1
            return super().step(input)

        def get_call_kwargs(self, case) -> dict:
            return {"base_url": base_url, "timeout": 30, "headers": headers}

        def validate_response(self, response, case, additional_checks=None, **kwargs) -> None:
            try:
                case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)
            except FailureGroup as failure:
                failures.append(f"{case.operation.label}: {failure}")
                raise

    started = time.monotonic()
    for round_seed in range(ROUNDS):
        machine = LinkedCalls if FRESH_CASES else seed(round_seed)(LinkedCalls)
        try:
            machine.run(
                settings=settings(
                    max_examples=SCENARIOS,
                    stateful_step_count=STEPS_PER_SCENARIO,
                    deadline=None,
                    suppress_health_check=list(HealthCheck),
                    database=None,
                    phases=[Phase.generate],
                )
            )
        except Flaky:
            # The server keeps what earlier scenarios created, so a replayed prefix of choices can
            # meet other answers and Hypothesis ends the round; every answer was checked above.
            pass
        if failures or all(linked_steps[target] >= MINIMUM_LINKED_STEPS for target in LINKED_TARGETS[group]):
            break
    report_counts(f"{group} linked calls", calls, time.monotonic() - started)
    print(f"of which followed a link, by target: {dict(sorted(linked_steps.items()))}")
    assert not failures, "\n\n".join(failures)
    assert all(linked_steps[target] >= 1 for target in LINKED_TARGETS[group]), linked_steps
