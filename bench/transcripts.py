"""How long a 1,000-message transcript takes to replay from DynamoDB Local.

The run is written as a model loop leaves it: a seed record with the system
and first user message, then one `transcript_messages_appended` record per
message (assistant turns that think and call a tool, the tool's result, a
user reply), each a real `append_run_record`. Replay is
`build_messages_from_run_log` on an in-process `DynamoRuntimeStore`, which
reads the run head and pages through `list_run_records`.
"""

from __future__ import annotations

import time

from bench.calls import CallCounter
from bench.report import Table
from bench.timing import percentile_ms
from cairn.dynamodb.client import make_client
from cairn.dynamodb.runtime_store import DynamoRuntimeStore
from cairn.runtime.model import MAX_TRANSCRIPT_PAGE_RECORDS, TRANSCRIPT_APPENDED, TRANSCRIPT_SEEDED
from cairn.settings import Settings
from cairn.transcript.codec import encode_messages
from cairn.transcript.model import Message
from cairn.transcript.replay import build_messages_from_run_log
from tests.contract.builders import T0, note, root_start, run_start
from tests.support.transcripts import assistant, call, results, system, thinking, user

MESSAGES = 1_000
SESSION = "transcripts"
# About what a tool-using agent writes per message: a paragraph of text.
PARAGRAPH = "The build log shows the cache was cold, so the step ran from scratch. " * 6


def measure_replay(settings: Settings, table_name: str, trials: int) -> Table:
    client = make_client(settings)
    store = DynamoRuntimeStore(client, table_name)
    run_id, stored_bytes = _write_transcript(store)
    counter = CallCounter(client)

    replayed = build_messages_from_run_log(store, run_id)  # warm: the first read of a run may pay for caches
    if len(replayed) != MESSAGES:
        raise RuntimeError(f"replay returned {len(replayed)} messages, {MESSAGES} were written")
    counter.take()
    latencies = []
    for _ in range(trials):
        began = time.perf_counter()
        build_messages_from_run_log(store, run_id)
        latencies.append(time.perf_counter() - began)
    calls = counter.take(per=trials)

    table = Table(
        f"Transcript replay from DynamoDB Local (build_messages_from_run_log, {trials} trials)",
        ["transcript", "records", "payload bytes", "DynamoDB calls per replay", "p50 ms", "p99 ms",
         "messages/s at p50"],
    )  # fmt: skip
    p50 = percentile_ms(latencies, 50)
    table.add(
        f"{MESSAGES:,} messages", MESSAGES, stored_bytes, calls, p50, percentile_ms(latencies, 99),
        MESSAGES / (p50 / 1000),
    )  # fmt: skip
    table.notes += [
        "One seed record (system and first user message) and one appended record per later message, each "
        "written by append_run_record; writing them is not timed.",
        f"Replay reads the run head, then pages of up to {MAX_TRANSCRIPT_PAGE_RECORDS} records, then the head "
        "again (a purge during the read would show), decoding every message.",
    ]
    return table


def _write_transcript(store: DynamoRuntimeStore) -> tuple[str, int]:
    """A run holding MESSAGES messages; returns its id and the transcript payload bytes."""
    run = run_start("transcript", session=SESSION)
    store.create_session(SESSION, T0)
    store.start_root_run(root_start(run))
    messages = _conversation()
    seed = encode_messages(messages[:2])
    store.append_run_record(note(run, "seed", body=seed, type_=TRANSCRIPT_SEEDED))
    stored = len(seed)
    for index, message in enumerate(messages[2:], start=2):
        body = encode_messages([message])
        store.append_run_record(note(run, f"message:{index}", body=body, type_=TRANSCRIPT_APPENDED))
        stored += len(body)
    return run.run_id, stored


def _conversation() -> list[Message]:
    """A system prompt, then turns of user text, a thinking tool call, its result and an answer."""
    messages = [system("You are a build assistant. " + PARAGRAPH)]
    turn = 0
    while len(messages) < MESSAGES:
        call_id = f"call-{turn}"
        messages += [
            user(f"Turn {turn}: why did the build take so long? " + PARAGRAPH),
            assistant(thinking(PARAGRAPH), call(call_id, "read_log", build=turn, lines=200)),
            results(call_id),
            assistant(PARAGRAPH),
        ]
        turn += 1
    return messages[:MESSAGES]
