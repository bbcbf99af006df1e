"""A history larger than one transcript page (1 MiB) replays byte for byte,
on the reference store and on DynamoDB Local (payloads split into chunk items)."""

from __future__ import annotations

import pytest

from cairn.dynamodb.client import make_client
from cairn.dynamodb.runtime_store import DynamoRuntimeStore
from cairn.runtime.inmem import InMemoryRuntimeStore
from cairn.runtime.model import MAX_TRANSCRIPT_PAGE_BYTES, TRANSCRIPT_APPENDED
from cairn.settings import Settings
from cairn.transcript.codec import encode_messages
from cairn.transcript.model import Message, Role, TextPart
from cairn.transcript.replay import build_messages_from_run_log, build_messages_from_run_log_prefix
from tests.contract.builders import T0, note, root_start, run_start
from tests.support.transcripts import assistant


@pytest.fixture(params=["memory", "dynamo"])
def store(request):
    if request.param == "memory":
        return InMemoryRuntimeStore()
    endpoint = request.getfixturevalue("dynamodb_local").endpoint
    return DynamoRuntimeStore(make_client(Settings(dynamodb_endpoint=endpoint)), request.getfixturevalue("local_table"))


def test_large_history_replays_exact_bytes_and_excludes_later_writes(store):
    store.create_session("session", T0)
    store.start_root_run(root_start(run_start()))
    payloads = []
    for index in range(514):
        message = Message(
            role=Role.USER,
            parts=[TextPart(text=f"{index}:" + "<evidence>&" * 220)],
            meta={"original": {"argument": "<exact>"}},
        )
        payloads.append(encode_messages([message]))
        store.append_run_record(note(run_start(), f"prefix-{index}", body=payloads[-1], type_=TRANSCRIPT_APPENDED))
    # One record near the 350 KB item limit, so DynamoDB stores it as chunks.
    big = encode_messages([assistant("é" * 200_000)])
    payloads.append(big)
    end = store.append_run_record(note(run_start(), "big", body=big, type_=TRANSCRIPT_APPENDED)).id
    store.append_run_record(
        note(run_start(), "later", body=encode_messages([assistant("later")]), type_=TRANSCRIPT_APPENDED)
    )

    replayed = build_messages_from_run_log_prefix(store, "run", end)

    assert sum(map(len, payloads)) > 2 * MAX_TRANSCRIPT_PAGE_BYTES
    assert [encode_messages([message]) for message in replayed] == payloads
    assert build_messages_from_run_log_prefix(store, "run", end) == replayed
    full = build_messages_from_run_log(store, "run")
    assert full[:-1] == replayed and full[-1].parts[0].text == "later"
