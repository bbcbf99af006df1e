"""An address's storage limit on DynamoDB Local, under writers in processes of their own.

Each process writes, replaces and deletes files of one address, or adds to,
pops and clears its agent sessions, through the use cases; the limit admits
exactly as many as fit, never one more, and afterwards the address's count
of stored bytes equals what its files and sessions hold, counted one by one.
"""

from __future__ import annotations

from collections.abc import Iterator
from multiprocessing.pool import Pool
from typing import Any

import pytest

from cairn.dynamodb import keys
from cairn.dynamodb.agent_session_items import POP_CLAIM_SECONDS, ROW_OVERHEAD, item_bytes
from cairn.dynamodb.client import make_client
from cairn.dynamodb.strands_session_items import message_bytes, row_bytes
from cairn.errors import SessionConflict, StorageLimitExceeded
from cairn.files.ports import stored_bytes
from cairn.jsontext import canonical, sent_size
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, make_services
from tests.support.processes import process_context
from tests.support.storage_usage import counted

SIZE = 20_000
# Room for exactly FITTING files of SIZE bytes under keys of the same length.
FITTING = 7
PROCESSES = 4


@pytest.fixture(scope="module")
def processes() -> Iterator[Pool]:
    """The racing processes, started once for the module."""
    with process_context().Pool(PROCESSES) as pool:
        yield pool


def limit_for(fitting: int) -> int:
    return fitting * stored_bytes("p0-f0", SIZE) + stored_bytes("p0-f0", SIZE) - 1


def services(endpoint: str, table: str, limit: int, clock: FakeClock | None = None):
    return make_services(
        clock=clock or FakeClock(), table_name=table, dynamodb_endpoint=endpoint, storage_max_bytes=limit
    )


def write_own_files(endpoint: str, table: str, limit: int, address_id: str, token: str, process: int) -> list[str]:
    """Writes four files of its own; the keys the limit let in."""
    files = services(endpoint, table, limit).files
    written = []
    for number in range(4):
        name = f"p{process}-f{number}"
        try:
            files.write(address_id, token, name, bytes([process]) * SIZE)
        except StorageLimitExceeded:
            continue
        written.append(name)
    return written


def churn(endpoint: str, table: str, limit: int, address_id: str, token: str, process: int) -> int:
    """Replaces and deletes its own two files in turn, at other sizes; how many writes the limit refused."""
    files = services(endpoint, table, limit).files
    refused = 0
    for round_number in range(12):
        name = f"p{process}-f{round_number % 2}"
        if round_number % 3 == 2:
            files.delete(address_id, token, name)
            continue
        try:
            files.write(address_id, token, name, b"x" * (SIZE // 2 + 997 * round_number))
        except StorageLimitExceeded:
            refused += 1
    return refused


def stored_now(api: LambdaClient, address_id: str, token: str) -> int:
    files = api.services.files
    names = files.list(address_id, token, "", after=None, limit=1000).keys
    return sum(stored_bytes(name, len(files.read(address_id, token, name))) for name in names)


def test_racing_processes_store_exactly_what_fits_and_the_count_is_what_is_stored(
    dynamodb_local, local_table: str, processes: Pool, clock: FakeClock
):
    limit = limit_for(FITTING)
    api = LambdaClient(services(dynamodb_local.endpoint, local_table, limit))
    created = api.provision()
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    arguments = [
        (dynamodb_local.endpoint, local_table, limit, address_id, token, process) for process in range(PROCESSES)
    ]
    written = [name for names in processes.starmap(write_own_files, arguments) for name in names]

    assert len(written) == FITTING  # sixteen tried, seven fit, never eight
    listed = api.services.files.list(address_id, token, "", after=None, limit=1000).keys
    assert sorted(listed) == sorted(written)
    assert counted(api.services.settings, address_id) == stored_now(api, address_id, token)

    processes.starmap(churn, arguments)
    assert counted(api.services.settings, address_id) == stored_now(api, address_id, token)
    assert stored_now(api, address_id, token) <= limit


# -- agent sessions ------------------------------------------------------------------------------

SESSIONS = ("s0", "s1")
ITEM = {"role": "user", "content": "x" * SIZE}


def add_cost(item: dict[str, Any]) -> int:
    """What an add of `item` under an add id counts: the item, and its claim, kept as long as the address."""
    return item_bytes(sent_size(canonical(item))) + ROW_OVERHEAD


def add_to_shared_sessions(endpoint: str, table: str, limit: int, address_id: str, token: str, process: int) -> int:
    """Four adds under add ids to the session it shares with another process; how many the limit let in."""
    sessions = services(endpoint, table, limit).agent_sessions
    landed = 0
    for number in range(4):
        try:
            sessions.add(address_id, token, SESSIONS[process % 2], [ITEM], add_id=f"p{process}-a{number}")
        except StorageLimitExceeded:
            continue
        landed += 1
    return landed


def churn_sessions(endpoint: str, table: str, limit: int, address_id: str, token: str, process: int) -> list[str]:
    """Pops (every other one under a pop id), adds at other sizes, replacements (of the newest item as read, of
    every item) and a clear; the items its claimed pops took."""
    sessions = services(endpoint, table, limit).agent_sessions
    session_id = SESSIONS[process % 2]
    claimed = []
    for round_number in range(10):
        if round_number % 3 == 0:
            pop_id = f"p{process}-r{round_number}" if round_number % 2 else None
            item = sessions.pop(address_id, token, session_id, pop_id=pop_id)
            if item is not None and pop_id is not None:
                claimed.append(canonical(item))
        elif process == 0 and round_number == 8:
            sessions.clear(address_id, token, session_id)
        elif round_number in (5, 7):
            summary = {"type": "compaction", "encrypted_content": "z" * (SIZE // 5 + 97 * process)}
            version = sessions.items(address_id, token, session_id, limit=0, before=None).version
            newest = 1 if round_number == 5 else None
            # Every item replaced by the user messages a summary keeps and the summary: more rows than one commit
            # holds, so the replacement is staged, and counts as it goes.
            kept = [] if newest else [{"role": "user", "content": f"p{process} said {n}"} for n in range(100)]
            try:
                sessions.replace(
                    address_id,
                    token,
                    session_id,
                    [*kept, summary],
                    newest=newest,
                    version=version,
                    replace_id=f"p{process}-x{round_number}",
                )
            except (SessionConflict, StorageLimitExceeded):
                continue
        else:
            item = {"role": "user", "content": "y" * (SIZE // 3 + 311 * round_number)}
            try:
                sessions.add(address_id, token, session_id, [item], add_id=f"p{process}-c{round_number}")
            except StorageLimitExceeded:
                continue
    return claimed


def session_items(api: LambdaClient, address_id: str, token: str, session_id: str) -> list[dict[str, Any]]:
    return api.services.agent_sessions.items(address_id, token, session_id, limit=None, before=None).items


def sessions_hold(api: LambdaClient, address_id: str, token: str) -> int:
    """What the sessions hold, counted from what they answer and their add claims' rows."""
    live = sum(
        len(session_id.encode())
        + ROW_OVERHEAD
        + sum(item_bytes(sent_size(canonical(item))) for item in session_items(api, address_id, token, session_id))
        for session_id in SESSIONS
    )
    client = make_client(api.services.settings)
    rows = client.query(
        TableName=api.services.settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :sessions)",
        ExpressionAttributeValues={":pk": {"S": keys.address_pk(address_id)}, ":sessions": {"S": "AGS#"}},
        ProjectionExpression="sk",
    )["Items"]
    add_claims = sum(1 for row in rows if "#R#" in row["sk"]["S"])
    return live + add_claims * ROW_OVERHEAD


def test_racing_session_writers_store_exactly_what_fits_and_the_count_is_what_the_sessions_hold(
    dynamodb_local, local_table: str, processes: Pool
):
    clock = FakeClock()
    setup = LambdaClient(services(dynamodb_local.endpoint, local_table, 10**9))
    created = setup.provision()
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    for session_id in SESSIONS:
        setup.services.agent_sessions.add(address_id, token, session_id, [{"role": "system", "content": "go"}])
    limit = counted(setup.services.settings, address_id) + FITTING * add_cost(ITEM) + add_cost(ITEM) - 1
    arguments = [
        (dynamodb_local.endpoint, local_table, limit, address_id, token, process) for process in range(PROCESSES)
    ]
    landed = sum(processes.starmap(add_to_shared_sessions, arguments))

    api = LambdaClient(services(dynamodb_local.endpoint, local_table, limit, clock))
    assert landed == FITTING  # sixteen tried, seven fit, never eight
    assert sum(len(session_items(api, address_id, token, s)) for s in SESSIONS) == FITTING + len(SESSIONS)
    assert counted(api.services.settings, address_id) == sessions_hold(api, address_id, token)

    claims = [text for texts in processes.starmap(churn_sessions, arguments) for text in texts]
    # The items claimed pops took are kept a day for their retries, and count until then.
    held = sum(item_bytes(sent_size(text)) for text in claims)
    assert claims
    assert counted(api.services.settings, address_id) == sessions_hold(api, address_id, token) + held
    assert counted(api.services.settings, address_id) <= limit

    # A day on, the next change to each session gives its claims' room back (the processes' clocks
    # started later than this one: a minute covers them).
    clock.advance(POP_CLAIM_SECONDS + 60)
    for session_id in SESSIONS:
        api.services.agent_sessions.add(address_id, token, session_id, [{"role": "user", "content": "later"}])
    assert counted(api.services.settings, address_id) == sessions_hold(api, address_id, token)


# -- Strands sessions ----------------------------------------------------------------------------

RUNS = tuple(f"run{process}" for process in range(PROCESSES))


def said(index: int, size: int) -> dict[str, Any]:
    return {"message_id": index, "message": {"role": "user", "content": [{"text": "x" * size}]}}


def run_until_full(endpoint: str, table: str, limit: int, address_id: str, token: str, process: int) -> int:
    """Adds messages to its own session's agent until the limit refuses one; how many it stored."""
    sessions = services(endpoint, table, limit).strands_sessions
    version = 1
    for index in range(4):
        try:
            version = sessions.create_message(
                address_id, token, RUNS[process], "default", said(index, SIZE), sessions.claim(version, "w", 600)
            )
        except StorageLimitExceeded:
            return index
    return 4


def churn_runs(endpoint: str, table: str, limit: int, address_id: str, token: str, process: int) -> None:
    """Replaces its agent's state and its first message (if the race left it one) at other sizes, racing the others."""
    sessions = services(endpoint, table, limit).strands_sessions
    record = sessions.record(address_id, token, RUNS[process], "agents", "default")
    assert record is not None
    version = record.version
    for round_number in range(8):
        claim = sessions.claim(version, "w", 600)
        try:
            if round_number % 2 and record.messages:
                message = said(0, SIZE // 4 + 523 * round_number)
                version = sessions.update_message(address_id, token, RUNS[process], "default", 0, message, claim)
            else:
                state = {"notes": "y" * (SIZE // 2 + 701 * round_number * process)}
                version = sessions.update_record(address_id, token, RUNS[process], "agents", "default", state, claim)
        except StorageLimitExceeded:
            continue


def runs_hold(api: LambdaClient, address_id: str, token: str) -> int:
    """What the Strands sessions hold, counted from what they answer."""
    sessions = api.services.strands_sessions
    total = 0
    for run in RUNS:
        record = sessions.record(address_id, token, run, "agents", "default")
        assert record is not None
        messages, _ = sessions.messages(address_id, token, run, "default", offset=0, limit=None)
        total += row_bytes(canonical(sessions.session(address_id, token, run)), run)
        total += row_bytes(record.text, "default") + sum(message_bytes(canonical(each)) for each in messages)
    return total


def test_racing_strands_runs_store_exactly_what_fits_and_the_count_is_what_the_sessions_hold(
    dynamodb_local, local_table: str, processes: Pool
):
    setup = LambdaClient(services(dynamodb_local.endpoint, local_table, 10**9))
    created = setup.provision()
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    for run in RUNS:
        setup.services.strands_sessions.create_session(address_id, token, run, {"session_id": run})
        setup.services.strands_sessions.create_record(address_id, token, run, "agents", "default", {})
    cost = message_bytes(canonical(said(0, SIZE)))
    limit = counted(setup.services.settings, address_id) + FITTING * cost + cost - 1
    arguments = [
        (dynamodb_local.endpoint, local_table, limit, address_id, token, process) for process in range(PROCESSES)
    ]
    stored = processes.starmap(run_until_full, arguments)

    api = LambdaClient(services(dynamodb_local.endpoint, local_table, limit))
    assert sum(stored) == FITTING  # sixteen tried, seven fit, never eight
    assert counted(api.services.settings, address_id) == runs_hold(api, address_id, token)

    processes.starmap(churn_runs, arguments)
    assert counted(api.services.settings, address_id) == runs_hold(api, address_id, token)
    assert counted(api.services.settings, address_id) <= limit
