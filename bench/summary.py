"""One table over every benchmark: the headline figures of each, beside the baseline it has.

Read off the detailed tables by their row labels, so a figure here is always
one of the printed ones; a row whose source table changed shape says so
instead of stopping the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.calls import CallCounts
from bench.cold_start import FLOOR_OF_PYDANTIC, FLOOR_OF_THE_API
from bench.report import Table
from bench.throughput import POST_1_TO_1, POST_8_TO_1, POST_8_TO_8


def summarize(tables: dict[str, Table]) -> Table:
    """The summary; `tables` are the detailed tables by the names `bench.__main__` gives them."""
    summary = Table("Summary of every benchmark", ["benchmark", "figure", "against"])
    for benchmark, figures in _ROWS:
        try:
            figure, against = figures(tables)
        except (KeyError, IndexError, StopIteration) as missing:
            figure, against = f"(not found: {missing})", ""
        summary.add(benchmark, figure, against)
    summary.notes.append(
        "Baselines ran in this process on the same DynamoDB Local: raw boto3 transactions of the same "
        "shape, and for downloads the buffered answer of the same attachment."
    )
    return summary


def _cells(table: Table, label: str) -> dict[str, Any]:
    """The row whose first cell is `label`, by column."""
    row = next(row for row in table.rows if row[0] == label)
    return dict(zip(table.columns, row, strict=True))


def _column(table: Table, prefix: str) -> str:
    return next(column for column in table.columns if column.startswith(prefix))


def _calls(table: Table, labels: list[str], prefix: str = "DynamoDB calls") -> str:
    column = _column(table, prefix)
    counts: list[CallCounts] = [_cells(table, label)[column] for label in labels]
    return " / ".join(f"{count.total:g}" for count in counts)


def _rates(values: list[float]) -> str:
    return " / ".join(f"{value:,.0f}" for value in values)


HANDLER_OPERATIONS = "post / duplicate / poll / ack / state read / write / large write / batch / append / root start"


def _handler_overhead(tables: dict[str, Table]) -> tuple[str, str]:
    rows = tables["handler"].rows
    column = tables["handler"].columns.index("overhead p50 ms")
    return " / ".join(
        f"{row[column]:.1f}" for row in rows
    ), "target <= 1 ms each, <= 2 ms for root start, none for the large write"


def _handler_costs(tables: dict[str, Table]) -> tuple[str, str]:
    costs = tables["handler_costs"]
    figures = " / ".join(str(_cells(costs, row[0])["$ per million"]) for row in costs.rows)
    raw = [(row[0], row[-2].split(" ", 1)[0], row[-1]) for row in costs.rows if row[-1] != "-"]
    return figures, "raw boto3: " + "; ".join(f"{name} {dollars} ({ratio}x)" for name, dollars, ratio in raw)


def _address_calls(tables: dict[str, Table]) -> tuple[str, str]:
    labels = ["provision", "inbox post (new key)", "inbox post (same key, same body)", "poll (wait=0)", "ack"]
    return _calls(tables["calls"], labels, "steady state"), ""


def _against_raw(name: str, target: str) -> Callable[[dict[str, Table]], tuple[str, str]]:
    """Cairn's rates, then the raw transaction's, Cairn's share of it and the share issue 30 asks for."""

    def figures(tables: dict[str, Table]) -> tuple[str, str]:
        rows = tables[name].rows
        shares = " / ".join(f"{row[3]} %" for row in rows)
        raw = f"raw transaction {_rates([row[2] for row in rows])} ({shares}); {target}"
        return _rates([row[1] for row in rows]), raw

    return figures


def _posts_against_raw(tables: dict[str, Table]) -> tuple[str, str]:
    """As `_against_raw`, and the HTTP floor's rates with their share of the raw transaction's."""
    rates, raw = _against_raw("posts_vs_raw", "target >= 90 % for 1 client and for 8 addresses")(tables)
    rows = tables["posts_vs_raw"].rows
    shares = " / ".join(f"{row[5]} %" for row in rows)
    floor = _rates([row[4] for row in rows])
    return rates, f"{raw}; uvicorn and the raw transaction alone (the HTTP floor) {floor} ({shares})"


def _stream_tables(tables: dict[str, Table]) -> tuple[str, str]:
    rows = tables["stream_tables"].rows
    return _rates([row[2] for row in rows]), "the raw baseline's table has no stream, cairn serve's is the first"


def _python_posts(tables: dict[str, Table]) -> tuple[str, str]:
    labels = [POST_1_TO_1, POST_8_TO_1, POST_8_TO_8]
    return _rates([_cells(tables["throughput"], label)["req/s"] for label in labels]), "as an agent's SDK sends them"


def _polls(tables: dict[str, Table]) -> tuple[str, str]:
    return _rates([_cells(tables["throughput"], "poll wait=0, 8 clients, 8 addresses")["req/s"]]), ""


def _wakeup(tables: dict[str, Table]) -> tuple[str, str]:
    row = _cells(tables["wakeup"], "POST answered -> long-poll answered")
    return f"{row['p50 ms']:.1f} ms / {row['p99 ms']:.1f} ms", ""


def _stream_wakeup(tables: dict[str, Table]) -> tuple[str, str]:
    row = _cells(tables["stream_wakeup"], "POST answered -> SSE event read")
    return f"{row['p50 ms']:.1f} ms / {row['p99 ms']:.1f} ms", ""


def _dispatch_calls(tables: dict[str, Table]) -> tuple[str, str]:
    label = next(row[0] for row in tables["webhooks"].rows if row[0].startswith("dispatcher's DynamoDB table calls"))
    return str(_cells(tables["webhooks"], label)["value"]), "target 0 for an address with no subscription"


def _state_calls(tables: dict[str, Table]) -> tuple[str, str]:
    labels = ["read a key", "write, replace (if_revision N)", "write, stale if_revision (conflict)",
              "batch of 5 sets (if_revision N)"]  # fmt: skip
    return _calls(tables["state_calls"], labels), ""


def _runtime_calls(tables: dict[str, Table]) -> tuple[str, str]:
    labels = ["append_run_record (new key)", "start_root_run", "start_child_run", "record_run_terminal (completed)"]
    return _calls(tables["runtime_calls"], labels), ""


def _seed_calls(tables: dict[str, Table]) -> tuple[str, str]:
    labels = ["begin_run_seed", "append_run_seed (literal)", "publish_run_seed", "start_root_run (attaching its seed)"]
    return _calls(tables["runtime_calls"], labels), "target <= 2 each"


def _appends(tables: dict[str, Table]) -> tuple[str, str]:
    labels = ["1 client, 1 run", "8 clients, 50 runs in 50 sessions", "8 clients, 50 runs in 1 session"]
    return _rates([_cells(tables["appends"], label)["appends/s"] for label in labels]), ""


def _pages(tables: dict[str, Table]) -> tuple[str, str]:
    full_first_pages = [row for row in tables["pages"].rows if row[1].startswith("first") and row[2] == 100]
    shortest, longest = full_first_pages[0], full_first_pages[-1]
    return f"{longest[5]:.1f} ms at {longest[0]}", f"{shortest[5]:.1f} ms at {shortest[0]}"


def _replay(tables: dict[str, Table]) -> tuple[str, str]:
    row = tables["replay"].rows[0]
    return f"{row[3].total:g} calls, {row[4]:.0f} ms / {row[5]:.0f} ms", ""


def _ingest(tables: dict[str, Table]) -> tuple[str, str]:
    new = _cells(tables["ingest"], "new message, 1 address")
    redelivery = _cells(tables["ingest"], "redelivery (same message id)")
    return f"{new['p50 ms']:.0f} ms / {new['p99 ms']:.0f} ms", f"redelivery {redelivery['p50 ms']:.0f} ms, no event"


def _downloads(tables: dict[str, Table]) -> tuple[str, str]:
    row = tables["downloads"].rows[-1]
    return f"{row[0]}: {row[2]:.0f} ms streamed", f"buffered {row[1]:.0f} ms (x{row[5]})"


def _outbound(tables: dict[str, Table]) -> tuple[str, str]:
    rows = {name: _cells(tables["outbound"], name) for name in ("ask for a code", "verify with the code", "send")}
    calls = " / ".join(f"{row['DynamoDB calls per operation'].total:g}" for row in rows.values())
    rate = _cells(tables["outbound"], "sends/s, 1 sender(s) on one address")["p50 ms"]
    return calls, f"{rate} to a local SMTP relay"


def _integration_calls(tables: dict[str, Table]) -> tuple[str, str]:
    labels = ["CairnSession.add_items (1 item)", "CairnSession.pop_item", "CairnSaver.put (continuing the head)",
              "CairnSaver.get_tuple (latest)", "CairnSessionRepository.create_message (appending)"]  # fmt: skip
    return _calls(tables["integration_calls"], labels), ""


def _integration_reads(tables: dict[str, Table]) -> tuple[str, str]:
    rows = tables["integration_reads"].rows
    # Two rows per read, the short history first.
    pairs = [(rows[index], rows[index + 1]) for index in range(0, len(rows), 2)]
    longest = " / ".join(f"{long[4]:.1f} ms" for _, long in pairs)
    shortest = " / ".join(f"{short[4]:.1f} ms" for short, _ in pairs)
    return f"{longest} at {pairs[0][1][1]}", f"{shortest} at {pairs[0][0][1]}"


def _checkpoint_puts(tables: dict[str, Table]) -> tuple[str, str]:
    unconditional, owned, saver = tables["checkpoint_puts"].rows
    return (
        f"{saver[2]:,.0f} over HTTP; {owned[2]:,.0f} as the raw transaction ({owned[6]})",
        f"unconditional PutItem {unconditional[2]:,.0f}",
    )


def _cold_start(tables: dict[str, Table]) -> tuple[str, str]:
    api = _cells(tables["cold_starts"], "API (cairn.entrypoints.api_handler)")
    boto3 = _cells(tables["cold_starts"], "import boto3 (baseline)")
    first_ratio = api["x boto3's first answer"]
    figure = f"import {api['import ms']:.0f} ms, first answer {api['first answer ms']:.0f} ms"
    against = (
        f"import boto3 {boto3['import ms']:.0f} ms (x{api['x import boto3']}), "
        f"its first GetItem {boto3['first answer ms']:.0f} ms (x{first_ratio})"
    )
    return figure, against


COLD_START_ENTRY_POINTS = {
    "API": "API (cairn.entrypoints.api_handler)",
    "email": "email ingest (cairn.entrypoints.email_handler)",
    "downloads": "downloads (cairn.entrypoints.streaming)",
    "wake-ups": "wake-ups (cairn.entrypoints.wake_handler)",
    "mail outcomes": "mail outcomes (cairn.entrypoints.outbound_events_handler)",
}


def _cold_start_ratios(tables: dict[str, Table]) -> tuple[str, str]:
    table = tables["cold_starts"]
    ratios = [_cells(table, label)["x import boto3"] for label in COLD_START_ENTRY_POINTS.values()]
    floors = [_cells(table, label)["x import boto3"] for label in (FLOOR_OF_THE_API, FLOOR_OF_PYDANTIC)]
    return " / ".join(f"{ratio:.2f}" for ratio in ratios), (
        f"target <= 1.3 for the API, <= 1.5 for each other; without Cairn, the API's libraries {floors[0]:.2f}, "
        f"boto3 and one pydantic model {floors[1]:.2f}"
    )


_ROWS: list[tuple[str, Callable[[dict[str, Table]], tuple[str, str]]]] = [
    ("DynamoDB calls: provision / inbox post / duplicate post / poll / ack", _address_calls),
    (
        "inbox posts/s over HTTP, side by side with raw (wrk): 1 client / 8 clients one address / 8 addresses",
        _posts_against_raw,
    ),
    ("inbox posts/s from Python clients (httpx): 1 client / 8 clients one address / 8 addresses", _python_posts),
    (
        "DynamoDB Local raw appends/s, 1 writer: no stream / first table with a stream / second",
        _stream_tables,
    ),
    ("polls/s over HTTP, 8 clients", _polls),
    ("long-poll wake-up after the POST answers, p50 / p99", _wakeup),
    ("event stream wake-up after the POST answers, p50 / p99", _stream_wakeup),
    ("wake-up dispatcher's table calls per event: address with no subscription / one", _dispatch_calls),
    ("state calls: read / write / conflict / batch of 5", _state_calls),
    ("state compare-and-set writes/s, 8 clients: one key / 32 keys", _against_raw("cas_vs_raw", "target >= 90 % each")),
    ("runtime calls: append / root start / child start / terminal", _runtime_calls),
    ("seed calls: begin / append / publish / root start attaching it", _seed_calls),
    ("runtime appends/s: 1 run / 50 runs in 50 sessions / in 1 session", _appends),
    ("API handler overhead above DynamoDB, p50 ms: " + HANDLER_OPERATIONS, _handler_overhead),
    ("$ per million requests (Lambda + DynamoDB): " + HANDLER_OPERATIONS, _handler_costs),
    ("list_run_records page of 100, p50", _pages),
    ("transcript replay, 1,000 messages: calls, p50 / p99", _replay),
    ("email ingest, 1 MB message, 1 address: p50 / p99", _ingest),
    ("largest attachment download, p50", _downloads),
    ("outbound mail calls: code request / verification / send", _outbound),
    ("integration calls: add_items / pop_item / put / get_tuple / Strands message", _integration_calls),
    ("integration reads, p50: get_items(limit=20) / get_tuple / list(limit=20)", _integration_reads),
    ("checkpoint puts/s with write ownership, 1 writer", _checkpoint_puts),
    ("API cold start: import, first answer (fresh processes)", _cold_start),
    ("cold start import, x import boto3: " + " / ".join(COLD_START_ENTRY_POINTS), _cold_start_ratios),
]
