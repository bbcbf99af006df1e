"""`cairn serve`: DynamoDB Local (or any DynamoDB) plus the API on 127.0.0.1."""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import time
from urllib.parse import urlsplit

import uvicorn

from cairn.api.app import create_app
from cairn.dynamodb.client import make_client, make_streams_client
from cairn.dynamodb.raw_messages import FileRawMessages
from cairn.dynamodb.table import ensure_table
from cairn.dynamodb.waiters import NotifyingWaiter
from cairn.local import runtime_key_file
from cairn.local.asgi import ResolverBridge
from cairn.local.dynamodb_local import DynamoDBLocal, DynamoDBLocalError
from cairn.local.http_protocol import JsonErrorHttpToolsProtocol
from cairn.local.mail_expiry import StoredMailExpiry
from cairn.local.outbound import OutboxMailer, SmtpRelayMailer, parse_relay
from cairn.local.outcomes import OutcomeSweepLoop, outcome_sweep_interval
from cairn.local.smtp import start_listener
from cairn.local.wakeups import SweepAlarm, WakeupLoop
from cairn.services import Services
from cairn.settings import InvalidSetting, Settings


class _AnnouncingServer(uvicorn.Server):
    """Prints the base URL once the socket is really listening."""

    def __init__(self, config: uvicorn.Config, base_url: str) -> None:
        super().__init__(config)
        self._base_url = base_url

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(f"Cairn is serving on {self._base_url}", flush=True)


def host_names(args: argparse.Namespace, settings: Settings) -> frozenset[str]:
    """The names a request's Host may carry: the listening name, `--allow-host`, the public base URL's."""
    names = {args.host, *args.allow_host}
    if settings.public_base_url:
        names.add(urlsplit(settings.public_base_url).hostname or "")
    return frozenset(name for name in names if name)


def _runtime_key(args: argparse.Namespace) -> str | None:
    if args.runtime_key_file is not None:
        return args.runtime_key_file.read_text().strip() or None
    if args.runtime_key:
        print(
            "cairn serve: --runtime-key shows the key to every local user in the process list; "
            "use --runtime-key-file or CAIRN_RUNTIME_KEY",
            file=sys.stderr,
            flush=True,
        )
    key: str | None = args.runtime_key
    return key


def _mailer(args: argparse.Namespace) -> OutboxMailer | SmtpRelayMailer:
    """The relay named by `--smtp-relay`, else the outbox folder in the data directory."""
    if args.smtp_relay:
        return SmtpRelayMailer(*parse_relay(args.smtp_relay))
    return OutboxMailer(args.data_dir / "outbox")


def run(args: argparse.Namespace) -> int:
    try:
        mailer = _mailer(args)
    except ValueError as error:
        print(f"cairn serve: --smtp-relay: {error}", file=sys.stderr)
        return 2
    overrides = {"table_name": args.table} if args.table else {}
    # Owner-only when made here: it holds the database, the keys and the mail (each also owner-only).
    args.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    runtime_key = _runtime_key(args)
    if runtime_key:
        overrides["runtime_key"] = runtime_key
    if "CAIRN_MAX_HELD_READS_PER_CLIENT" not in os.environ:
        # Every local client is 127.0.0.1: counted as one client, they would share one client's reads.
        overrides["max_held_reads_per_client"] = 0
    with contextlib.ExitStack() as stack:
        endpoint = args.dynamodb_endpoint
        if endpoint is None:
            try:
                database = stack.enter_context(DynamoDBLocal(args.data_dir))
            except DynamoDBLocalError as error:
                print(f"cairn serve: {error}", file=sys.stderr)
                return 1
            endpoint = database.endpoint
            print(f"DynamoDB Local on {endpoint}, data in {args.data_dir}", flush=True)
        try:
            settings = Settings.from_environment(
                dynamodb_endpoint=endpoint,
                email_blob_dir=args.data_dir / "email",
                # Webhooks to this machine, so wake-ups can be tried here.
                webhook_allow_local=True,
                **overrides,
            )
        except InvalidSetting as error:
            print(f"cairn serve: setting {error}", file=sys.stderr)
            return 2
        if settings.runtime_key is None:
            key_path = args.data_dir / runtime_key_file.FILE_NAME
            settings = settings.replace(runtime_key=runtime_key_file.load_or_create(key_path))
            print(
                f"Runtime key (bearer token for /api/v1/runtime and /api/v1/memory) kept in {key_path}",
                flush=True,
            )
        if settings.server_secret is None and settings.server_secret_arn is None:
            secret_path = args.data_dir / runtime_key_file.SERVER_SECRET_FILE_NAME
            settings = settings.replace(server_secret=runtime_key_file.load_or_create(secret_path))
        client = make_client(settings)
        ensure_table(client, settings.table_name)
        waiter = NotifyingWaiter()
        alarm = SweepAlarm(time.time())
        services = Services.build(settings, client=client, waiter=waiter, mailer=mailer, retry_scheduled=alarm.ring)
        app = create_app(services)
        streams = make_streams_client(settings)
        wakeups = stack.enter_context(
            WakeupLoop(client, streams, settings.table_name, services.dispatcher, services.sweep, alarm)
        )
        waiter.listen(wakeups.read_soon)
        interval = outcome_sweep_interval(settings.outbound_outcome_deadline_seconds)
        stack.enter_context(OutcomeSweepLoop(services.outcome_sweep, interval=interval))
        stored_mail = FileRawMessages(settings.email_blob_dir)
        stack.enter_context(StoredMailExpiry(stored_mail, settings.event_retention_seconds))
        try:
            listener = start_listener(
                services.email,
                stored_mail,
                domain=settings.email_domain,
                host=args.host,
                port=args.smtp_port,
            )
        except OSError as error:
            print(f"cairn serve: cannot listen for SMTP on port {args.smtp_port}: {error}", file=sys.stderr)
            return 1
        stack.callback(listener.stop)
        print(f"SMTP on {args.host}:{args.smtp_port}, mail for @{settings.email_domain}", flush=True)
        outgoing = f"relay {args.smtp_relay}" if args.smtp_relay else f"{args.data_dir / 'outbox'} (.eml files)"
        print(f"Outbound mail to {outgoing}", flush=True)
        config = uvicorn.Config(
            ResolverBridge(
                app.resolve, host_names=host_names(args, settings), trust_forwarded=args.trust_forwarded_headers
            ),
            host=args.host,
            port=args.port,
            lifespan="off",
            # httptools parses in C where h11 is Python; what it refuses is answered with Cairn's JSON error.
            http=JsonErrorHttpToolsProtocol,
            log_level="warning",
            timeout_keep_alive=30,
            # Waiting long-polls must not hold Ctrl-C up for their full 25 s.
            timeout_graceful_shutdown=2,
            backlog=2048,
            # Without a proxy in front, X-Forwarded-For from 127.0.0.1 is any local client's claim.
            proxy_headers=args.trust_forwarded_headers,
        )
        try:
            _AnnouncingServer(config, f"http://{args.host}:{args.port}").run()
        except KeyboardInterrupt:
            # uvicorn re-raises Ctrl-C after its graceful shutdown; it is the
            # normal way to stop, not an error.
            pass
        print("Cairn stopped.", flush=True)
    return 0
