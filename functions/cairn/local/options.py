"""Options of `cairn serve`, kept apart so the `cairn` command can list them
without importing the server (uvicorn, the API) for every agent command."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name to answer besides IP addresses and localhost (repeatable; for a proxy in front)",
    )
    parser.add_argument(
        "--trust-forwarded-headers",
        action="store_true",
        help="take X-Forwarded-For/-Proto from a proxy on this machine (off: they are ignored)",
    )
    parser.add_argument("--port", type=int, default=8787, help="HTTP port (default 8787)")
    parser.add_argument("--smtp-port", type=int, default=2525, help="SMTP port for inbound mail (default 2525)")
    parser.add_argument(
        "--smtp-relay",
        metavar="HOST:PORT",
        help="send outbound mail through this SMTP server (default: write .eml files to <data dir>/outbox)",
    )
    parser.add_argument("--data-dir", type=Path, default=Path(".cairn/data"), help="DynamoDB Local data folder")
    parser.add_argument("--dynamodb-endpoint", help="use this DynamoDB instead of starting DynamoDB Local")
    parser.add_argument("--table", help="table name (default: CAIRN_TABLE_NAME or 'cairn')")
    parser.add_argument(
        "--runtime-key-file",
        type=Path,
        help="file holding the bearer secret the runtime and memory routes require (or CAIRN_RUNTIME_KEY)",
    )
    parser.add_argument(
        "--runtime-key",
        help="the secret itself; visible to every local user in the process list, so prefer the file",
    )
