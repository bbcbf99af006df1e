"""Storage faults at every DynamoDB call of every runtime store mutation.

Each command of `cairn.runtime.methods.METHODS` that writes is sent through
the service's routes (`HttpRuntimeStore`) while the Nth DynamoDB call of the
request fails, for every N and every kind of fault (see
`tests.support.faults`). After each fault:

- the answer is the command's result or a 503 with `Retry-After` that the
  client raises as `RuntimeStoreUnavailable`, never a 500;
- the exact same command, sent again, answers what a fault-free run answers;
- the stored items are those a fault-free run leaves (no duplicate record,
  pointer or guard; the same run and session heads);
- a different command for the same target still gets the first-write-wins
  answer the contract documents.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass, replace
from datetime import timedelta
from typing import Any

import httpx
import pytest

from cairn.dynamodb.client import make_client
from cairn.dynamodb.keys import run_pk, session_pk
from cairn.dynamodb.runtime_store import DynamoRuntimeStore
from cairn.runtime.errors import (
    ContractError,
    EventConflictError,
    PreparationAbandonedError,
    RunCancellationConflictError,
    RunConflictError,
    RunSuspensionConflictError,
    RunTerminalConflictError,
    RuntimeStoreUnavailable,
    SeedConflictError,
    SessionPurgedError,
    is_error,
)
from cairn.runtime.http import HttpRuntimeStore
from cairn.runtime.methods import METHODS
from cairn.runtime.model import (
    EMPTY_SEED_END_ID,
    AppendResult,
    ChildRunStart,
    OneShotChildRunStart,
    PreparationAttempt,
    PreparationOperation,
    RunPreparation,
    RunRepairOutcome,
    RunStart,
    RunStatus,
    SeedPublication,
    Session,
    SynchronousRunStart,
)
from cairn.settings import Settings
from tests.contract.builders import (
    DIGEST,
    LITERAL,
    OTHER_DIGEST,
    PREPARED,
    T0,
    cancellation,
    declaration,
    intent_record,
    link_record,
    note,
    one_shot_start,
    operation,
    root_start,
    run_start,
    seed_append,
    started_record,
    suspension,
    terminal,
)
from tests.contract.test_runtime_ended_session import canceled_completion
from tests.support.faults import FAULTS, RUNTIME_KEY, FaultInjector, calls_made, faulty_api

ENDED_AT = T0 + timedelta(seconds=5)
LATER = T0 + timedelta(hours=1)


@dataclass(frozen=True)
class Case:
    """The session and runs of one case, named after it so that cases never meet."""

    name: str

    @property
    def session(self) -> str:
        return f"{self.name}-session"

    def run_id(self, role: str) -> str:
        return f"{self.name}-{role}"

    @property
    def root(self) -> RunStart:
        return run_start(self.run_id("root"), session=self.session)

    @property
    def successor(self) -> RunStart:
        return run_start(self.run_id("next"), session=self.session, predecessor=self.root.run_id)

    # Link records get a fixed key: a key's guard item must not differ between cases.

    def child(self, digest: bytes = DIGEST) -> ChildRunStart:
        run = run_start(self.run_id("child"), session=self.session, agent="child-agent", parent=self.root.run_id)
        return ChildRunStart(
            request_digest=digest,
            run=run,
            parent_linked=link_record(run, key="link"),
            started=started_record(run),
            cancellation=intent_record(run),
        )

    def solo_child(self, digest: bytes = DIGEST) -> OneShotChildRunStart:
        run = run_start(self.run_id("solo-child"), session="", agent="child-agent", parent=self.run_id("solo"))
        return OneShotChildRunStart(
            request_digest=digest, run=run, parent_linked=link_record(run, key="link"), started=started_record(run)
        )


ROLES = ("root", "child", "next", "other", "solo", "solo-child")


# -- preparations ------------------------------------------------------------------


def nothing(store, case: Case) -> None:
    pass


def session(store, case: Case) -> None:
    store.create_session(case.session, T0)


def ended_session(store, case: Case) -> None:
    session(store, case)
    store.end_session(case.session, ENDED_AT)


def running(store, case: Case) -> None:
    session(store, case)
    store.start_root_run(root_start(case.root))


def suspended(store, case: Case) -> None:
    running(store, case)
    store.record_run_suspension(suspension(case.root))


def finished(store, case: Case) -> None:
    running(store, case)
    store.append_run_record(note(case.root, "note"))
    store.record_run_terminal(terminal(case.root))
    store.end_session(case.session, ENDED_AT)


def solo(store, case: Case) -> None:
    store.start_one_shot_run(one_shot_start(case.run_id("solo")))


def synchronous(case: Case) -> SynchronousRunStart:
    command = one_shot_start(case.run_id("solo"))
    return SynchronousRunStart(run=command.run, started=command.started)


def begun(store, case: Case) -> None:
    session(store, case)
    store.begin_run_seed(declaration(case.root))


def compiled(store, case: Case) -> None:
    begun(store, case)
    store.append_run_seed(seed_append(declaration(case.root), "prepared", EMPTY_SEED_END_ID, prepared=PREPARED))


def published(store, case: Case) -> None:
    compiled(store, case)
    store.publish_run_seed(publication(case))


def publication(case: Case, prepared_bytes: int = len(PREPARED)) -> SeedPublication:
    return SeedPublication(
        run_id=case.root.run_id,
        attempt_id="attempt",
        seed_end_id=EMPTY_SEED_END_ID,
        end_id="1",
        prepared_bytes=prepared_bytes,
    )


def ends(found: RunPreparation | None) -> tuple[str, str, int] | None:
    """Where an accepted body ends: what a retry must answer again, without the case's own names."""
    return None if found is None else (found.seed.end_id, found.end_id, found.prepared_bytes)


def other_command(case: Case) -> PreparationOperation:
    return replace(operation(declaration(case.root)), command_id="other-command")


# -- commands ------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeCommand:
    """One runtime mutation, and a rival command for the same target that the first write wins against.

    The rival writes nothing; `refusal` is the sentinel it raises, the repair
    outcome it answers, or None when it is answered with what is stored.
    """

    method: str
    prepare: Callable[[Any, Case], None]
    send: Callable[[Any, Case], Any]
    rival: Callable[[Any, Case], Any]
    refusal: type[Exception] | RunRepairOutcome | None = None
    variant: str = ""  # tells apart two commands of one method from one preparation


COMMANDS = [
    RuntimeCommand(
        "begin_run_seed",
        session,
        # The answer names the case's run: compare where the seed ends (what a retry must keep).
        lambda store, case: store.begin_run_seed(declaration(case.root)).end_id,
        lambda store, case: store.begin_run_seed(replace(declaration(case.root), command_id="other-command")),
        SeedConflictError,
    ),
    RuntimeCommand(
        "append_run_seed",
        begun,
        lambda store, case: store.append_run_seed(
            seed_append(declaration(case.root), "first", EMPTY_SEED_END_ID, messages=LITERAL)
        ),
        lambda store, case: store.append_run_seed(
            seed_append(declaration(case.root), "first", EMPTY_SEED_END_ID, messages=b"[]")
        ),
        SeedConflictError,
    ),
    RuntimeCommand(
        "publish_run_seed",
        compiled,
        lambda store, case: store.publish_run_seed(publication(case)),
        lambda store, case: store.publish_run_seed(publication(case, prepared_bytes=3)),
        SeedConflictError,
    ),
    RuntimeCommand(
        "settle_run_preparation",
        begun,
        lambda store, case: store.settle_run_preparation(
            PreparationAttempt(operation(declaration(case.root)), "attempt")
        ),
        lambda store, case: store.begin_run_seed(declaration(case.root)),
        PreparationAbandonedError,
    ),
    RuntimeCommand(
        "find_run_preparation",
        published,
        lambda store, case: ends(store.find_run_preparation(operation(declaration(case.root)))),
        lambda store, case: store.find_run_preparation(other_command(case)),
        SeedConflictError,
    ),
    RuntimeCommand(
        "create_session",
        nothing,
        session,
        lambda store, case: store.create_session(case.session, LATER),
    ),
    RuntimeCommand(
        "end_session",
        session,
        lambda store, case: store.end_session(case.session, ENDED_AT),
        lambda store, case: store.end_session(case.session, LATER),
    ),
    RuntimeCommand(
        "purge_session",
        finished,
        lambda store, case: store.purge_session(case.session),
        lambda store, case: store.create_session(case.session, T0),
        SessionPurgedError,
    ),
    RuntimeCommand(
        "start_root_run",
        session,
        lambda store, case: store.start_root_run(root_start(case.root)),
        lambda store, case: store.start_root_run(root_start(case.root, digest=OTHER_DIGEST)),
        RunConflictError,
    ),
    # A start in an ended session: recorded with its cancellation intent (start outcome `stop`).
    RuntimeCommand(
        "start_root_run",
        ended_session,
        lambda store, case: store.start_root_run(root_start(case.root)),
        lambda store, case: store.start_root_run(root_start(case.root, digest=OTHER_DIGEST)),
        RunConflictError,
    ),
    # The same start as older runtimes send it: RunStarted and a canceled RunCompleted, the run closed at once.
    RuntimeCommand(
        "start_root_run",
        ended_session,
        lambda store, case: store.start_root_run(canceled_completion(root_start(case.root))),
        lambda store, case: store.start_root_run(root_start(case.root, digest=OTHER_DIGEST)),
        RunConflictError,
        "canceled-completion",
    ),
    # A continuation (resume) of a suspended run: the successor is started and linked once.
    RuntimeCommand(
        "start_root_run",
        suspended,
        lambda store, case: store.start_root_run(root_start(case.successor)),
        lambda store, case: store.start_root_run(
            root_start(run_start(case.run_id("other"), session=case.session, predecessor=case.root.run_id))
        ),
        RunConflictError,
    ),
    RuntimeCommand(
        "start_child_run",
        running,
        lambda store, case: store.start_child_run(case.child()),
        lambda store, case: store.start_child_run(case.child(OTHER_DIGEST)),
        RunConflictError,
    ),
    RuntimeCommand(
        "start_one_shot_run",
        nothing,
        solo,
        lambda store, case: store.start_one_shot_run(one_shot_start(case.run_id("solo"), digest=OTHER_DIGEST)),
        RunConflictError,
    ),
    RuntimeCommand(
        "start_synchronous_run",
        nothing,
        lambda store, case: store.start_synchronous_run(synchronous(case)),
        lambda store, case: store.start_one_shot_run(one_shot_start(case.run_id("solo"))),
        RunConflictError,
    ),
    RuntimeCommand(
        "start_one_shot_child_run",
        solo,
        lambda store, case: store.start_one_shot_child_run(case.solo_child()),
        lambda store, case: store.start_one_shot_child_run(case.solo_child(OTHER_DIGEST)),
        RunConflictError,
    ),
    RuntimeCommand(
        "append_run_record",
        running,
        lambda store, case: store.append_run_record(note(case.root, "note")),
        lambda store, case: store.append_run_record(note(case.root, "note", body=b'{"text":"other"}')),
        EventConflictError,
    ),
    RuntimeCommand(
        "record_run_cancellation",
        running,
        lambda store, case: store.record_run_cancellation(cancellation(case.root)),
        lambda store, case: store.record_run_cancellation(cancellation(case.root, "other_reason", key="cancel-2")),
        RunCancellationConflictError,
    ),
    RuntimeCommand(
        "record_run_suspension",
        running,
        lambda store, case: store.record_run_suspension(suspension(case.root)),
        lambda store, case: store.record_run_suspension(
            suspension(case.root, key="suspended-2", suspension_id="other")
        ),
        RunSuspensionConflictError,
    ),
    RuntimeCommand(
        "record_run_terminal",
        running,
        lambda store, case: store.record_run_terminal(terminal(case.root)),
        lambda store, case: store.record_run_terminal(terminal(case.root, RunStatus.FAILED, key="failed")),
        RunTerminalConflictError,
    ),
    RuntimeCommand(
        "repair_run_suspension",
        running,
        lambda store, case: store.repair_run_suspension(suspension(case.root)),
        lambda store, case: store.repair_run_terminal(terminal(case.root, RunStatus.FAILED, key="failed")),
        RunRepairOutcome.DIFFERENT_TERMINAL,
    ),
    RuntimeCommand(
        "repair_run_terminal",
        running,
        lambda store, case: store.repair_run_terminal(terminal(case.root)),
        lambda store, case: store.record_run_terminal(terminal(case.root, RunStatus.FAILED, key="failed")),
        RunTerminalConflictError,
    ),
]


def command_id(command: RuntimeCommand) -> str:
    return "-".join(filter(None, (command.method, "from", command.prepare.__name__, command.variant)))


def test_every_mutating_method_is_in_the_matrix():
    reads = {name for name in METHODS if name.startswith(("load_", "list_"))}
    assert set(METHODS) - reads == {command.method for command in COMMANDS}


# -- what must hold ------------------------------------------------------------------


def answer(result: Any) -> Any:
    """What an exact retry must answer again; not whether this call was the one that wrote."""
    if isinstance(result, AppendResult):
        return result.id, result.session_status
    if isinstance(result, Session):
        return result.status, result.created_at, result.ended_at
    if result in (RunRepairOutcome.STORED, RunRepairOutcome.ALREADY_STORED):
        return "stored"
    if is_dataclass(result):
        return tuple(answer(getattr(result, field.name)) for field in fields(result))
    return result


def stored_items(client, table: str, case: Case) -> dict[str, list[str]]:
    """Every item of the case's session and runs, its name written out and `updated_at` (a clock reading) left out."""
    partitions = [session_pk(case.session), *(run_pk(case.run_id(role)) for role in ROLES)]
    found = {}
    for pk in partitions:
        items = client.query(
            TableName=table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
            ConsistentRead=True,
        )["Items"]
        text = [
            json.dumps({k: v for k, v in item.items() if k != "updated_at"}, sort_keys=True, default=repr)
            for item in items
        ]
        found[pk.replace(case.name, "case")] = [line.replace(case.name, "case") for line in text]
    return found


def assert_rival_loses(store, case: Case, command: RuntimeCommand) -> None:
    """The rival's documented answer; that it wrote nothing the caller's item comparison shows."""
    if isinstance(command.refusal, type):
        with pytest.raises(ContractError) as refused:
            command.rival(store, case)
        assert is_error(refused.value, command.refusal), refused.value
        return
    answered = command.rival(store, case)
    if command.refusal is not None:
        assert answered.outcome == command.refusal


# -- the matrix ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def runtime_over_http(dynamodb_local):
    """The runtime store through the service's routes; every answer is kept for inspection.

    One table for the module: every case works on a session and runs of its own.
    """
    api, injector = faulty_api(dynamodb_local.endpoint)
    answers: list[httpx.Response] = []

    def handle(request: httpx.Request) -> httpx.Response:
        answers.append(api.handle(request))
        return answers[-1]

    store = HttpRuntimeStore("http://cairn.test", runtime_key=RUNTIME_KEY, transport=httpx.MockTransport(handle))
    inspector = make_client(api.services.settings)
    yield store, injector, answers, lambda case: stored_items(inspector, api.services.settings.table_name, case)
    store.close()


@pytest.mark.parametrize("kind", FAULTS)
@pytest.mark.parametrize("command", COMMANDS, ids=command_id)
def test_a_runtime_fault_is_retryable_and_an_exact_retry_answers_once(runtime_over_http, command, kind: str):
    store, injector, answers, items_of = runtime_over_http
    baseline = Case(f"{command_id(command)}-{kind}-0")
    command.prepare(store, baseline)
    results = []
    total = calls_made(injector, lambda: results.append(command.send(store, baseline)))
    expected = answer(results[0])
    expected_items = items_of(baseline)
    for at in range(1, total + 1):
        case = Case(f"{command_id(command)}-{kind}-{at}")
        command.prepare(store, case)
        injector.arm(kind, at)
        try:
            first = answer(command.send(store, case))
        except RuntimeStoreUnavailable:
            first = None
            reply = answers[-1]
            assert reply.status_code == 503 and reply.headers["Retry-After"] == "1", reply.text
            assert reply.json()["error"]["contract"] is False
        finally:
            injector.disarm()
        assert injector.fired, f"call {at} of {total} was never made"
        assert first in (None, expected)
        assert answer(command.send(store, case)) == expected
        assert_rival_loses(store, case, command)
        assert items_of(case) == expected_items


def test_the_dynamo_runtime_store_raises_unavailable_unwrapped(dynamodb_local, local_table):
    """In process too, not only over HTTP: a storage failure is `RuntimeStoreUnavailable`, never botocore's."""
    client = make_client(Settings(dynamodb_endpoint=dynamodb_local.endpoint))
    injector = FaultInjector(client)
    store = DynamoRuntimeStore(client, local_table)
    case = Case("direct")
    running(store, case)
    injector.arm("throttling", 1)
    with pytest.raises(RuntimeStoreUnavailable):
        store.append_run_record(note(case.root, "note"))
    injector.disarm()
    assert store.append_run_record(note(case.root, "note")).inserted
    measured = Case("measured")
    finished(store, measured)
    total = calls_made(injector, lambda: store.purge_session(measured.session))
    for at in range(1, total + 1):
        case = Case(f"direct-purge-{at}")
        finished(store, case)
        injector.arm("throttling", at)
        with pytest.raises(RuntimeStoreUnavailable):
            store.purge_session(case.session)
        injector.disarm()
        store.purge_session(case.session)
        with pytest.raises(SessionPurgedError):
            store.load_session(case.session)
