"""`CairnStorage`, Strands' `Storage` on an address's files, against `cairn serve` over real HTTP.

Strands' own `SnapshotSessionManager` on it: an agent on a scripted model
resumes from its snapshot in a new process and goes back to an earlier
one, and the agent's own `storage` serves a manager given none. Files written whole while another process reads them: every read is
one write's bytes, never a mix. The protocol's answers for what is not
there, and prefixes listed in order.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from strands.session import SnapshotSessionManager
from strands.storage.storage import Storage
from strands.types.exceptions import StorageError

from cairn.client import Address
from cairn.integrations.strands.storage import MAX_FILE_BYTES, CairnStorage
from tests.support import strands_runs
from tests.support.processes import process_context
from tests.support.serve import ServeProcess

pytestmark = pytest.mark.one_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def address(served: ServeProcess):
    with Address.provision(served.base_url, task_id="strands-storage", expires_in=3600) as created:
        yield created


def snapshot_turn_in_new_process(served: ServeProcess, address: Address, session_id: str, message: str) -> dict:
    argv = ["snapshot-turn", served.base_url, address.id, address.read_token, session_id, message]
    command = [sys.executable, "-m", "tests.support.strands_runs", *argv]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_an_agent_resumes_from_its_snapshot_in_a_new_process_and_goes_back_to_an_earlier_one(
    address: Address, served: ServeProcess
):
    first = snapshot_turn_in_new_process(served, address, "snap-1", "My name is Ada.")
    second = snapshot_turn_in_new_process(served, address, "snap-1", "What is my name?")

    assert first == {"answer": "heard: My name is Ada."}
    assert second == {"answer": "heard: My name is Ada. | What is my name?"}
    manager = SnapshotSessionManager(session_id="snap-1", storage=CairnStorage(address))
    agent = Agent(model=strands_runs.EchoingModel(), session_manager=manager, callback_handler=None)
    assert [message["content"][0]["text"] for message in agent.messages] == [
        "My name is Ada.",
        "heard: My name is Ada.",
        "What is my name?",
        "heard: My name is Ada. | What is my name?",
    ]
    earliest, latest = asyncio.run(manager.list_snapshot_ids(agent))
    assert earliest < latest
    assert asyncio.run(manager.restore_snapshot(agent, snapshot_id=earliest))
    assert [message["content"][0]["text"] for message in agent.messages] == [
        "My name is Ada.",
        "heard: My name is Ada.",
    ]


def test_as_the_agents_storage_it_keeps_the_snapshots_of_a_manager_given_none(address: Address):
    """Strands' subsystems take the agent's `storage` when they have none of their own."""
    storage = CairnStorage(address)

    def agent() -> Agent:
        manager = SnapshotSessionManager(session_id="agent-storage")
        return Agent(model=strands_runs.EchoingModel(), storage=storage, session_manager=manager, callback_handler=None)

    agent()("Remember me.")

    assert [message["content"][0]["text"] for message in agent().messages] == ["Remember me.", "heard: Remember me."]
    assert any("agent-storage" in key for key in asyncio.run(storage.list("")))


def test_a_file_read_while_others_replace_it_is_always_one_writes_bytes(address: Address, served: ServeProcess):
    """Two writers replace one file with sizes of one, three and nine pieces; two readers read throughout."""
    where = (served.base_url, address.id, address.read_token, "race/file.bin")
    sizes = [100_000, 1_000_000, MAX_FILE_BYTES]
    plans = [[(fill, sizes[(fill + round_) % 3]) for round_ in range(6)] for fill in (0x41, 0x42)]
    written = {(fill, size) for plan in plans for fill, size in plan}
    context = process_context()
    # The writers start once the readers read, however long each process takes to start.
    ready, stop, results = context.Barrier(4), context.Event(), context.Queue()
    readers = [context.Process(target=strands_runs.file_reader, args=(*where, ready, stop, results)) for _ in range(2)]
    writers = [context.Process(target=strands_runs.file_writer, args=(*where, ready, plan)) for plan in plans]
    for process in (*readers, *writers):
        process.start()
    for writer in writers:
        writer.join(timeout=300)
        assert writer.exitcode == 0
    stop.set()
    seen: list[list[Any]] = [results.get(timeout=120) for _ in readers]
    for reader in readers:
        reader.join(timeout=60)

    reads = [read for reader_saw in seen for read in reader_saw if read is not None]
    assert len(reads) >= 10
    assert all(whole for _, _, whole in reads)
    assert {(fill, size) for fill, size, _ in reads} <= written
    # Each reader's last read came after both writers ended: it is one of their last writes.
    assert {tuple(reader_saw[-1][:2]) for reader_saw in seen} <= {plan[-1] for plan in plans}


def test_the_protocols_answers_for_what_is_not_there_and_prefixes_in_order(address: Address):
    storage = CairnStorage(address)
    keys = ["s/b", "s/a/2", "s/a/10", "s/é", "s/~", "t/a", "s"]

    async def scenario() -> dict[str, Any]:
        for key in keys:
            await storage.write(key, key.encode())
        await storage.write("empty", b"")
        await storage.delete("never-written")
        await storage.delete("t/a")
        with pytest.raises(StorageError):
            await storage.write("x", b"\0" * (MAX_FILE_BYTES + 1))
        return {
            "all": await storage.list(""),
            "s/": await storage.list("s/"),
            "s/a": await storage.list("s/a"),
            "missing": await storage.read("never-written"),
            "deleted": await storage.read("t/a"),
            "read": await storage.read("s/é"),
            "empty": await storage.read("empty"),
        }

    found = asyncio.run(scenario())

    assert isinstance(storage, Storage)
    assert found["all"] == sorted({*keys, "empty"} - {"t/a"})
    assert found["s/"] == ["s/a/10", "s/a/2", "s/b", "s/~", "s/é"]
    assert found["s/a"] == ["s/a/10", "s/a/2"]
    assert found["missing"] is None and found["deleted"] is None
    assert found["read"] == "s/é".encode()
    assert found["empty"] == b""
    # A page at a time: DynamoDB Local takes the previous page's last key as where the next one starts.
    pages, after = [], None
    while True:
        request = {"prefix": "s/", "limit": 2, **({"after": after} if after else {})}
        page = address.http.request("POST", f"{address.address_url}/files/list", token=address.read_token,
                                    body=json.dumps(request).encode()).json()  # fmt: skip
        pages.append(page["keys"])
        if not (after := page["next"]):
            break
    assert pages == [["s/a/10", "s/a/2"], ["s/b", "s/~"], ["s/é"]]
