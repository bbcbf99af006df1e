"""Print Cairn's figures on DynamoDB Local; nothing here passes or fails.

    python -m bench [--quick] [--json]      (from the project root; `make bench`)

The run starts its own DynamoDB Local in a temporary folder and removes both
when it ends. What it measures, in the order printed:

1. DynamoDB calls per API operation (provision, inbox post, duplicate post,
   poll, ack). The resolver that Lambda runs is called with API Gateway REST
   proxy events; botocore event hooks on the service's own client count every
   call by operation name. "Fresh process" means new services and a new
   client, as in a cold Lambda container; "steady state" is the mean over
   repeats in a warm one. Rows for concurrent writers show what contention
   on one address costs in transactions.
2. Throughput over real HTTP: `cairn serve` runs as a subprocess on the same
   DynamoDB Local; 8 threads, each with one keep-alive httpx client, send
   requests back to back for a fixed time (after a warm-up that is not
   counted). Requests per second and latency p50/p99 per scenario.
3. Wake-up latency: a long-poll (wait=20) waits on an address; an inbox POST
   then lands on it. Times from the POST's answer to the poll's answer. Then
   the same through one open event stream (`Accept: text/event-stream`):
   times from the POST's answer to the client reading the event's frame.
   Last, DynamoDB calls while a reader waits 20 s on an idle feed with
   Lambda's waiter (re-reading with back-off): long-polls against one event
   stream, counted as in 1.
   wake-ups by webhook: from the POST's answer to the webhook's arrival at a
   receiver on 127.0.0.1 (through DynamoDB Local's stream), deliveries per
   second for a burst of posts, the processor time of an idle `cairn serve`
   and its DynamoDB Local, and DynamoDB table calls while a subscribed
   agent waits 25 s idle beside one 25 s long-poll. `--only webhooks` runs
   this part alone.
4. Baseline: the inbox append's transaction (head Update with a condition +
   event Put) in raw boto3 at 1 and 8 threads on the same DynamoDB Local,
   with and without the idempotency record a post with an Idempotency-Key
   writes. Then Cairn's posts side by side with the raw transaction of the
   same actions: wrk (a load generator in C; `make bench` installs it)
   posts through `cairn serve` in rounds that alternate with the raw
   appends' after a warm-up of both, so both meet DynamoDB Local's JVM
   equally warm (on a DynamoDB Local of their own); the median of each
   side's rounds, and Cairn's share. A third side in the same rounds, the
   HTTP floor (`bench/http_floor.py`), posts through uvicorn as `cairn
   serve` runs it to a server that only commits the raw transaction.
   `--only side-by-side` runs this part alone.
5. Durable state: DynamoDB calls and transaction items per state operation
   (read, list, create, replace, stale write, delete, a batch of 5, and
   concurrent compare-and-set increments), counted as in 1; increments per
   second over HTTP against `cairn serve` by 8 clients (read, PUT with
   if_revision, again on 409) on one hot key and on 32 keys (4 each); the
   same increments as raw boto3 transactions (key Update under its revision +
   head Update + event Put) at 8 threads, and Cairn as a share of them.
6. Runtime store: DynamoDB calls and transaction items per operation of an
   in-process `DynamoRuntimeStore` (append, root start, child start,
   terminal), counted as in 1; appends per second by threads sharing one
   store: 1 and 8 on one run, 8 across 50 runs (in 50 sessions, and in one);
   `list_run_records` page latency on runs of 10, 100 and 10,000 records
   (2,000 with --quick), from the start, the middle and the end.
   `--only runtime-calls` runs its calls table alone.
6b. The API handler's own time: API Gateway REST events fed straight to
   `cairn.entrypoints.api_handler.lambda_handler` in this process; per hot
   operation (inbox post, duplicate post, poll, ack, state read, write, a
   write of a value near the state budget, batch, runtime append and root
   start) the time per request, the time
   inside the DynamoDB client's calls and their difference, the handler's
   overhead (p50/p99), beside issue 30's targets; a cost per million
   requests (Lambda GB-seconds and DynamoDB request units at list prices)
   beside the raw boto3 transactions'; a cProfile of the largest overhead
   among the operations with a target.
   `--only handler` runs this part alone.
7. Transcripts: `build_messages_from_run_log` on an in-process
   `DynamoRuntimeStore` replaying a 1,000-message transcript (one record per
   message), its time and DynamoDB calls.
8. Email: `EmailIngest` (the services' own) on a 1 MB message with two
   attachments stored in the local raw message folder: time and DynamoDB
   calls per message for one and two recipient addresses, and a redelivery.
9. Attachment downloads of 1, 4 and 8 MB: the resolver's buffered answer
   against the download function's streaming loop posting to a Runtime API
   endpoint on 127.0.0.1, in the same process; the ratio is what streaming adds.
10. Outbound mail: DynamoDB calls and time per code request, verification,
   send and repeated send (`Contacts`, `Sending` with the SMTP relay mailer
   of `cairn serve --smtp-relay`, an aiosmtpd relay in this process), and
   sends per second by 1 and 4 senders on one address.
11. Agent-framework integrations, run as their SDKs' own classes
    (`CairnSession`, `CairnSaver`, Strands' `CairnSessionRepository`)
    through the resolver in-process: DynamoDB calls and HTTP requests per
    call, counted as in 1; `get_items(limit=20)`, `get_tuple` and
    `list(limit=20)` on a session or thread of 100 and of 10,000 items or
    checkpoints (2,000 with --quick), over HTTP and counted; checkpoint puts
    with write ownership, over HTTP and as raw boto3 transactions, against
    unconditional `PutItem`s of the same item (DynamoDBSaver's way).
    `--only integrations` runs this part alone.
12. Cold starts: for each Lambda entry point (API, email ingest, downloads,
    wake-ups, mail outcomes),
    fresh Python processes import it and answer a first request; import time,
    time to the first answer and peak memory, each beside a fresh process's
    `import boto3` (and its first GetItem) in the same run as a ratio; and
    two floors without Cairn: the API's libraries, and boto3 with one
    pydantic model. Then the processor time to make each SDK object that
    makes its own HTTP client, beside a default `httpx.Client()`.
    `--only cold-starts` runs this part alone.
13. DynamoDB Local's streams: the raw append by one writer on a table
    without a stream, on the first table with one and on a second, in a
    DynamoDB Local started for this part.

Then the DynamoDB calls of each operation beside the minimum it could have
(read off the counted tables), and last one summary table: each benchmark's
headline figures, beside the baseline it was measured against.

Client, server and DynamoDB Local share this machine's cores, so the figures
compare shapes and code paths; they are not AWS capacity.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.baseline import measure_baseline
from bench.calls import measure_calls
from bench.cas import measure_cas
from bench.cas_baseline import compare_cas_with_cairn, measure_cas_baseline
from bench.checkpoint_puts import measure_checkpoint_puts
from bench.clients import measure_client_costs
from bench.cold_start import measure_cold_starts
from bench.downloads import measure_downloads
from bench.email_ingest import measure_ingest
from bench.floor import floor_table
from bench.handler import measure_handler
from bench.idle_reads import measure_idle_reads
from bench.integration_calls import measure_integration_calls
from bench.integration_costs import measure_read_costs
from bench.outbound import measure_outbound
from bench.report import Table
from bench.runtime_appends import measure_appends
from bench.runtime_calls import measure_runtime_calls
from bench.runtime_pages import measure_pages
from bench.seed_pages import measure_seed_pages
from bench.server import CairnServer
from bench.side_by_side import Plan as SideBySide
from bench.side_by_side import compare_posts
from bench.state_calls import measure_state_calls
from bench.stream_tables import measure_stream_tables
from bench.stream_wakeup import measure_stream_wakeup
from bench.summary import summarize
from bench.throughput import measure_throughput
from bench.transcripts import measure_replay
from bench.wakeup import measure_wakeup
from bench.webhooks import IDLE_SECONDS, measure_webhooks
from cairn.dynamodb.client import make_client
from cairn.dynamodb.table import ensure_table
from cairn.local.dynamodb_local import DynamoDBLocal, find_distribution
from cairn.settings import Settings

SERVICE_TABLE = "bench-resolver"
SERVER_TABLE = "bench-serve"
RAW_TABLE = "bench-raw"
RUNTIME_TABLE = "bench-runtime"
TRANSCRIPT_TABLE = "bench-transcripts"
EMAIL_TABLE = "bench-email"
DOWNLOAD_TABLE = "bench-downloads"
OUTBOUND_TABLE = "bench-outbound"
WAKE_TABLE = "bench-wake"
COLD_TABLE = "bench-cold"
INTEGRATIONS_TABLE = "bench-integrations"
HANDLER_TABLE = "bench-handler"


@dataclass(frozen=True)
class Plan:
    """How long each part runs."""

    repeats: int
    seconds: float
    warmup: float
    trials: int
    # Records in the long run that list_run_records pages through.
    history: int
    # Fresh processes per cold start figure.
    processes: int
    # Cairn's posts and the raw transaction in alternating rounds.
    side_by_side: SideBySide


FULL = Plan(
    repeats=20, seconds=8.0, warmup=1.5, trials=50, history=10_000, processes=7,
    side_by_side=SideBySide(warmup=20.0, rounds=3, seconds=6.0),
)  # fmt: skip
QUICK = Plan(
    repeats=5, seconds=2.5, warmup=1.0, trials=15, history=2_000, processes=3,
    side_by_side=SideBySide(warmup=2.0, rounds=1, seconds=2.0),
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs and fewer trials (noisier figures)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    only_help = "run one part alone (integrations: with its calls floor rows)"
    parts = ["integrations", "handler", "cold-starts", "runtime-calls", "side-by-side", "webhooks"]
    parser.add_argument("--only", choices=parts, help=only_help)
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cairn-bench-") as workdir:
        only = {
            "integrations": run_integrations,
            "handler": run_handler,
            "cold-starts": run_cold_starts,
            "runtime-calls": run_runtime_calls,
            "side-by-side": run_side_by_side,
            "webhooks": run_webhooks,
        }
        tables = only[args.only](plan, Path(workdir)) if args.only else run(plan, Path(workdir))
    setup = {
        "python": platform.python_version(),
        "cpu_cores": os.cpu_count(),
        "dynamodb_local": find_distribution().name,
        "plan": "quick" if args.quick else "full",
        "parts": args.only or "all",
        "wall_seconds": round(time.monotonic() - started, 1),
    }

    if args.json:
        print(json.dumps({"setup": setup, "tables": [table.as_json() for table in tables]}, indent=2))
    else:
        print(", ".join(f"{name}: {value}" for name, value in setup.items()), end="\n\n")
        print("\n\n".join(table.render() for table in tables))
    return 0


def run(plan: Plan, workdir: Path) -> list[Table]:
    with DynamoDBLocal(workdir / "dynamodb") as database:
        settings = _settings(database)
        client = make_client(settings)
        names = (SERVICE_TABLE, RAW_TABLE, RUNTIME_TABLE, TRANSCRIPT_TABLE, EMAIL_TABLE, DOWNLOAD_TABLE)
        for name in (*names, OUTBOUND_TABLE, COLD_TABLE, HANDLER_TABLE):
            # No stream: DynamoDB Local slows each write by every stream record it keeps (the webhook
            # part, which reads a stream, makes its own table).
            ensure_table(client, name, stream=False)

        _progress("1/16 DynamoDB calls per operation, and while a reader waits on an idle feed (20 s twice)")
        calls = measure_calls(settings, plan.repeats)
        idle_reads = measure_idle_reads(settings)
        _progress("2/16 DynamoDB calls per state operation")
        state_calls = measure_state_calls(settings, plan.repeats)
        _progress("3/16 raw TransactWriteItems baseline")
        baseline = measure_baseline(client, RAW_TABLE, plan.seconds, plan.warmup)
        _progress("4/16 raw compare-and-set baseline")
        # A client of its own: its calls are counted.
        cas_baseline, raw_cas = measure_cas_baseline(make_client(settings), RAW_TABLE, plan.seconds, plan.warmup)
        _progress("5/16 HTTP throughput against cairn serve")
        with CairnServer(database.endpoint, SERVER_TABLE, workdir) as server:
            throughput = measure_throughput(server, plan.seconds, plan.warmup)
            _progress("6/16 long-poll and event stream wake-up")
            wakeup = measure_wakeup(server, plan.trials)
            stream_wakeup = measure_stream_wakeup(server, plan.trials)
            _progress("7/16 state compare-and-set over HTTP")
            cas, cairn_cas = measure_cas(server, plan.seconds, plan.warmup)
            _progress(f"7b/16 wake-ups by webhook (with two {IDLE_SECONDS} s idle measurements)")
            webhooks = measure_webhooks(server, database, settings.replace(table_name=WAKE_TABLE), plan.trials)
        _progress("7c/16 inbox posts against the raw transaction, side by side (wrk, a DynamoDB Local of its own)")
        posts_vs_raw = compare_posts(settings, workdir, plan.side_by_side)
        _progress("8/16 DynamoDB calls per runtime store operation")
        runtime_calls = measure_runtime_calls(settings, RUNTIME_TABLE, plan.repeats)
        _progress("8b/16 the API handler's own time per request, its cost, and a profile")
        handler = measure_handler(settings, HANDLER_TABLE, handler_requests(plan))
        _progress("9/16 runtime store appends")
        appends = measure_appends(settings, RUNTIME_TABLE, plan.seconds, plan.warmup)
        _progress(f"10/16 list_run_records pages (writing a {plan.history:,}-record history first)")
        pages = measure_pages(settings, RUNTIME_TABLE, plan.history, plan.trials)
        _progress("11/16 initial-history seed pages of 10 and 300 chained turns (writing the chains first)")
        seed_pages = measure_seed_pages(settings, RUNTIME_TABLE, plan.trials)
        _progress("12/16 transcript replay (writing a 1,000-message transcript first)")
        replay = measure_replay(settings, TRANSCRIPT_TABLE, plan.trials)
        _progress("13/16 email ingest of a 1 MB message")
        ingest = measure_ingest(settings, EMAIL_TABLE, workdir / "email", plan.trials)
        _progress("14/16 attachment downloads, buffered and streamed")
        downloads = measure_downloads(settings, DOWNLOAD_TABLE, workdir / "downloads", plan.trials)
        _progress("15/16 outbound mail: codes, sends, sends per second to a local SMTP relay")
        outbound = measure_outbound(settings, OUTBOUND_TABLE, plan.trials, plan.seconds, plan.warmup)
        _progress("16/16 cold starts of each Lambda entry point in fresh processes")
        cold_starts = measure_cold_starts(settings, COLD_TABLE, workdir / "cold", plan.processes)
        client_costs = measure_client_costs()
        integrations = measure_integrations(plan, settings, database, workdir, "16b/16 ")
    _progress("16c/16 DynamoDB Local's writes on tables with and without a stream (a DynamoDB Local of its own)")
    stream_tables = measure_stream_tables(settings, workdir, plan.seconds, plan.warmup)
    tables = {
        "calls": calls, "throughput": throughput, "wakeup": wakeup, "stream_wakeup": stream_wakeup,
        "webhooks": webhooks, "idle_reads": idle_reads, "baseline": baseline,
        "posts_vs_raw": posts_vs_raw, "stream_tables": stream_tables,
        "state_calls": state_calls, "cas": cas,
        "cas_baseline": cas_baseline, "cas_vs_raw": compare_cas_with_cairn(cairn_cas, raw_cas),
        "runtime_calls": runtime_calls, **handler, "appends": appends, "pages": pages, "seed_pages": seed_pages,
        "replay": replay,
        "ingest": ingest, "downloads": downloads, "outbound": outbound, **integrations,
        "cold_starts": cold_starts, "client_costs": client_costs,
    }  # fmt: skip
    tables["floor"] = floor_table(tables)
    # The detailed tables, then one that gathers every benchmark's headline figures.
    return [*tables.values(), summarize(tables)]


def run_integrations(plan: Plan, workdir: Path) -> list[Table]:
    """The integrations' part alone, and the rows of the calls floor it measures."""
    with DynamoDBLocal(workdir / "dynamodb") as database:
        settings = _settings(database)
        ensure_table(make_client(settings), SERVICE_TABLE, stream=False)
        tables = measure_integrations(plan, settings, database, workdir)
    return [*tables.values(), floor_table(tables)]


def run_handler(plan: Plan, workdir: Path) -> list[Table]:
    """The handler's part alone."""
    return _alone(
        workdir,
        HANDLER_TABLE,
        lambda settings: list(measure_handler(settings, HANDLER_TABLE, handler_requests(plan)).values()),
    )


def run_webhooks(plan: Plan, workdir: Path) -> list[Table]:
    """The wake-ups by webhook alone, on a `cairn serve` of their own."""
    with DynamoDBLocal(workdir / "dynamodb") as database:
        settings = _settings(database).replace(table_name=WAKE_TABLE)
        with CairnServer(database.endpoint, SERVER_TABLE, workdir) as server:
            return [measure_webhooks(server, database, settings, plan.trials)]


def run_cold_starts(plan: Plan, workdir: Path) -> list[Table]:
    """The cold starts alone, and the SDK objects' making."""
    return _alone(
        workdir,
        COLD_TABLE,
        lambda settings: [
            measure_cold_starts(settings, COLD_TABLE, workdir / "cold", plan.processes),
            measure_client_costs(),
        ],
    )


def run_runtime_calls(plan: Plan, workdir: Path) -> list[Table]:
    """The runtime store's calls per operation alone."""
    return _alone(
        workdir, RUNTIME_TABLE, lambda settings: [measure_runtime_calls(settings, RUNTIME_TABLE, plan.repeats)]
    )


def run_side_by_side(plan: Plan, workdir: Path) -> list[Table]:
    """Cairn's posts, the HTTP floor's and the raw transaction's alone (on a DynamoDB Local of their own)."""
    settings = Settings(table_name=SERVICE_TABLE)
    return [compare_posts(settings, workdir, plan.side_by_side)]


def _alone(workdir: Path, table_name: str, measure: Callable[[Settings], list[Table]]) -> list[Table]:
    """One part on a DynamoDB Local and a table of its own."""
    with DynamoDBLocal(workdir / "dynamodb") as database:
        settings = _settings(database)
        ensure_table(make_client(settings), table_name, stream=False)
        return measure(settings)


def handler_requests(plan: Plan) -> int:
    # Enough requests per operation for a p99 that is not the maximum on the full plan.
    return plan.trials * 4


def measure_integrations(
    plan: Plan, settings: Settings, database: DynamoDBLocal, workdir: Path, step: str = ""
) -> dict[str, Table]:
    """Calls counted on the resolver's table; reads and puts on a server and table of their own.

    Run last: `cairn serve` streams its table, and the long histories' stream records would
    slow every later part's writes on DynamoDB Local.
    """
    _progress(f"{step}agent-framework integrations (writing {plan.history:,}-item histories first)")
    served = settings.replace(table_name=INTEGRATIONS_TABLE)
    with CairnServer(database.endpoint, INTEGRATIONS_TABLE, workdir) as server:
        return {
            "integration_calls": measure_integration_calls(settings, plan.repeats),
            "integration_reads": measure_read_costs(server, served, plan.history, plan.trials),
            "checkpoint_puts": measure_checkpoint_puts(server, served, plan.seconds, plan.warmup),
        }


def _settings(database: DynamoDBLocal) -> Settings:
    return Settings(
        dynamodb_endpoint=database.endpoint,
        table_name=SERVICE_TABLE,
        # Limits would refuse the repeated calls; their DynamoDB call is counted either way.
        poll_rate_per_minute=1_000_000_000,
        create_rate_per_minute=1_000_000_000,
    )


def _progress(message: str) -> None:
    # Progress goes to stderr, so `--json > figures.json` stays one document.
    print(f"bench: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
