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
   then lands on it. Times from the POST's answer to the poll's answer.
4. Baseline: the inbox append's transaction (head Update with a condition +
   event Put) in raw boto3 at 1 and 8 threads on the same DynamoDB Local,
   and Cairn's HTTP posts/s as a share of it.

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
from dataclasses import dataclass
from pathlib import Path

from bench.baseline import compare_with_cairn, measure_baseline
from bench.calls import measure_calls
from bench.report import Table
from bench.server import CairnServer
from bench.throughput import measure_throughput
from bench.wakeup import measure_wakeup
from cairn.local.dynamodb_local import DynamoDBLocal, find_distribution
from cairn.settings import Settings
from cairn.store.client import make_client
from cairn.store.table import ensure_table

SERVICE_TABLE = "bench-resolver"
SERVER_TABLE = "bench-serve"
RAW_TABLE = "bench-raw"


@dataclass(frozen=True)
class Plan:
    """How long each part runs."""

    repeats: int
    seconds: float
    warmup: float
    trials: int


FULL = Plan(repeats=20, seconds=8.0, warmup=1.5, trials=50)
QUICK = Plan(repeats=5, seconds=2.5, warmup=1.0, trials=15)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs and fewer trials (noisier figures)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cairn-bench-") as workdir:
        tables = run(plan, Path(workdir))
    setup = {
        "python": platform.python_version(),
        "cpu_cores": os.cpu_count(),
        "dynamodb_local": find_distribution().name,
        "plan": "quick" if args.quick else "full",
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
        settings = Settings(
            dynamodb_endpoint=database.endpoint,
            table_name=SERVICE_TABLE,
            # Limits would refuse the repeated calls; their DynamoDB call is counted either way.
            poll_rate_per_minute=1_000_000_000,
            create_rate_per_minute=1_000_000_000,
        )
        client = make_client(settings)
        for table in (SERVICE_TABLE, RAW_TABLE):
            ensure_table(client, table)

        _progress("1/4 DynamoDB calls per operation")
        calls = measure_calls(settings, plan.repeats)
        _progress("2/4 raw TransactWriteItems baseline")
        baseline, raw = measure_baseline(client, RAW_TABLE, plan.seconds, plan.warmup)
        _progress("3/4 HTTP throughput against cairn serve")
        with CairnServer(database.endpoint, SERVER_TABLE, workdir) as server:
            throughput, cairn = measure_throughput(server, plan.seconds, plan.warmup)
            _progress("4/4 long-poll wake-up")
            wakeup = measure_wakeup(server, plan.trials)
    return [calls, throughput, wakeup, baseline, compare_with_cairn(cairn, raw)]


def _progress(message: str) -> None:
    # Progress goes to stderr, so `--json > figures.json` stays one document.
    print(f"bench: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
