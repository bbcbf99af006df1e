"""Inbox posts through `cairn serve` against the raw transaction, side by side on one DynamoDB Local.

DynamoDB Local is a Java program whose compiler keeps making its hot paths
faster for a minute or more of load: a post's transaction takes it three
times the processor time in the first seconds that it takes once warm. Two
rates measured a minute apart therefore compare the JVM's moments as much as
the code. Here both run first for a warm-up, then in alternating rounds (raw
first in odd rounds, Cairn first in even ones), and each side's figure is
the median of its rounds.

Cairn's posts come from wrk (`bench/native_load.py`), one connection per
client, so the figure is the server's; the raw appends are the baseline's
own, with the same three actions as a post (head, event, idempotency record).
Each Cairn round posts to addresses of its own (`Shape.fresh_paths`).
A third side, the HTTP floor (`bench/http_floor.py`), posts the same way
through uvicorn, as `cairn serve` runs it, to a server that does nothing but
the raw transaction on a worker thread: what HTTP and the thread hop cost by
themselves, and so how much of the gap between Cairn and raw is Cairn's.
Both run on a DynamoDB Local of this part's own, where the server's table is
the only one with a stream: the posts leave thousands of stream records,
which would slow every streamed table the later parts make.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from bench import agent
from bench.baseline import SAME_ACTIONS, SHAPES, THREADS, appending, raw_writers
from bench.native_load import WrkResult, post_load
from bench.report import Table
from bench.server import CairnServer, FloorServer
from bench.timing import LoadResult, Operation, run_load
from cairn.dynamodb.client import make_client
from cairn.dynamodb.table import ensure_table
from cairn.local.dynamodb_local import DynamoDBLocal
from cairn.settings import Settings

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

RAW_TABLE = "bench-side-raw"
SERVER_TABLE = "bench-side-serve"
# The baseline's shapes, in its order.
SHAPE_NAMES = ("1 writer, 1 address", f"{THREADS} writers, 1 address", f"{THREADS} writers, {THREADS} addresses")


@dataclass(frozen=True)
class Plan:
    """How long each side runs: a warm-up of each, then `rounds` rounds of `seconds` per shape and side."""

    warmup: float
    rounds: int
    seconds: float


@dataclass(frozen=True)
class Shape:
    name: str
    writers: int
    addresses: int
    raw: list[Operation]

    def fresh_paths(self, server: CairnServer) -> list[str]:
        """One inbox path per writer, on addresses provisioned for this round alone.

        The part raises the feed quota, so a head would otherwise keep a
        counter block for every 32 events ever posted (`feed_counts`) and
        each post would rewrite a head that grows round after round. New
        addresses keep each round's heads the size a feed reaches in use.
        """
        with server.client() as http:
            inboxes = [agent.provision(http).inbox_path for _ in range(self.addresses)]
        return [inboxes[number % self.addresses] for number in range(self.writers)]

    def floor_paths(self, client: DynamoDBClient, round_name: str) -> list[str]:
        """One path per writer for the HTTP floor: the writer's own appender on heads made for this round."""
        writers = raw_writers(client, RAW_TABLE, f"BENCH#FLOOR#{round_name}", self.writers, self.addresses)
        return [f"/floor/{quote(writer.head, safe='')}/{number}" for number, writer in enumerate(writers)]


@dataclass
class Rounds:
    cairn: list[WrkResult]
    floor: list[WrkResult]
    raw: list[LoadResult]

    def cairn_rate(self) -> float:
        return statistics.median(result.per_second for result in self.cairn)

    def floor_rate(self) -> float:
        return statistics.median(result.per_second for result in self.floor)

    def raw_rate(self) -> float:
        return statistics.median(result.per_second for result in self.raw)

    def each_round(self) -> str:
        """Each round's rates, Cairn / floor / raw."""
        rounds = zip(self.cairn, self.floor, self.raw, strict=True)
        return ", ".join(" / ".join(f"{side.per_second:.0f}" for side in sides) for sides in rounds)


def compare_posts(settings: Settings, workdir: Path, plan: Plan) -> Table:
    with DynamoDBLocal(workdir / "dynamodb-side-by-side") as database:
        client = make_client(settings.replace(dynamodb_endpoint=database.endpoint))
        ensure_table(client, RAW_TABLE, stream=False)
        with (
            CairnServer(database.endpoint, SERVER_TABLE, workdir) as server,
            FloorServer(database.endpoint, RAW_TABLE, workdir) as floor,
        ):
            shapes = _shapes(client)
            # The busiest shape warms each side's path through the new JVM.
            busiest = shapes[-1]
            post_load(server.base_url, busiest.fresh_paths(server), busiest.writers, plan.warmup)
            post_load(floor.base_url, busiest.floor_paths(client, "warm-up"), busiest.writers, plan.warmup)
            run_load(busiest.raw, plan.warmup)
            sides = Sides(server, floor, client)
            measured = {shape.name: sides.alternate(shape, plan) for shape in shapes}

    table = Table(
        f"Cairn over HTTP against the raw transaction, side by side ({plan.rounds} alternating rounds of "
        f"{plan.seconds:g} s a side after {plan.warmup:g} s of each)",
        ["shape", "Cairn posts/s", "raw, same actions /s", "Cairn as % of it", "HTTP floor posts/s",
         "floor as % of raw", "Cairn as % of floor", "rounds, Cairn / floor / raw",
         "p50 ms, Cairn / floor / raw", "refused or failed"],
    )  # fmt: skip
    for name, rounds in measured.items():
        cairn, floor_rate, raw = rounds.cairn_rate(), rounds.floor_rate(), rounds.raw_rate()
        p50s = (
            statistics.median(result.p50_ms for result in rounds.cairn),
            statistics.median(result.p50_ms for result in rounds.floor),
            statistics.median(result.p50_ms() for result in rounds.raw),
        )
        failed = sum(result.refused + result.socket_errors for result in [*rounds.cairn, *rounds.floor])
        table.add(
            name, cairn, raw, round(100 * cairn / raw), floor_rate, round(100 * floor_rate / raw),
            round(100 * cairn / floor_rate), rounds.each_round(), " / ".join(f"{p50:.1f}" for p50 in p50s), failed,
        )  # fmt: skip
    table.notes += [
        "Cairn: wrk (a load generator in C) with one keep-alive connection per writer, each post with a new "
        "Idempotency-Key, to addresses provisioned for its round, through uvicorn, the resolver and validation "
        "to its one transaction. Raw: the "
        "baseline's boto3 transaction with the same three actions, from threads of this process.",
        "HTTP floor: the same wrk posts through uvicorn as `cairn serve` runs it (httptools, uvloop, a worker "
        "thread per request) to a server that parses the JSON body and commits the raw transaction, nothing "
        "else (bench/http_floor.py): what any Python server of this shape pays above the transaction.",
        "Each side's figure is the median of its rounds, on a DynamoDB Local of this part's own; each round "
        "runs the sides in a turn of their order, so each side goes first once in three rounds. The server's "
        "table has a stream (wake-ups), read by its wake-up reader while the posts land; the raw and floor "
        "table has none (part 16c measures what a stream costs the first streamed table).",
        "The throughput table gives the same posts from Python clients (httpx), as an agent's SDK sends them.",
    ]
    return table


def _shapes(client: DynamoDBClient) -> list[Shape]:
    shapes = []
    for number, (name, (threads, heads)) in enumerate(zip(SHAPE_NAMES, SHAPES.values(), strict=True)):
        writers = raw_writers(client, RAW_TABLE, f"BENCH#SIDE#{number}", threads, heads)
        shapes.append(Shape(name, threads, heads, [appending(writer, RAW_TABLE, SAME_ACTIONS) for writer in writers]))
    return shapes


@dataclass
class Sides:
    """The three ways a round posts: Cairn's server, the HTTP floor and the raw transaction from threads."""

    server: CairnServer
    floor: FloorServer
    client: DynamoDBClient

    def alternate(self, shape: Shape, plan: Plan) -> Rounds:
        rounds = Rounds(cairn=[], floor=[], raw=[])

        def cairn() -> None:
            paths = shape.fresh_paths(self.server)
            rounds.cairn.append(post_load(self.server.base_url, paths, shape.writers, plan.seconds))

        def floor() -> None:
            paths = shape.floor_paths(self.client, f"{shape.writers}x{shape.addresses}#{len(rounds.floor)}")
            rounds.floor.append(post_load(self.floor.base_url, paths, shape.writers, plan.seconds))

        def raw() -> None:
            rounds.raw.append(run_load(shape.raw, plan.seconds))

        order = [raw, floor, cairn]
        for number in range(plan.rounds):
            turn = number % len(order)
            for side in order[turn:] + order[:turn]:
                side()
        return rounds
