"""The agent-side `cairn` commands: provision, state, events, inbox, mail, subscriptions and files.

Answers are JSON on stdout (`files read` prints the file's own bytes);
failures are `{"error": {"code", "message", ...}}` on stderr with an exit
code that says what to do next (`EXIT_*`). The read token is never printed:
it stays in the task's owner-only file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.client.address import Address
from cairn.client.events import MAX_WAIT
from cairn.client.http import HttpClient
from cairn.client.private import UnsafeFile, read_private
from cairn.client.tasks import TaskStore
from cairn.errors import CairnError

EXIT_OK = 0
EXIT_FAILED = 1  # the server refused or failed, or could not be reached
EXIT_USAGE = 2  # bad arguments or input, or an exposed credential file (argparse also exits 2)
EXIT_CONFLICT = 3  # a compare-and-set lost, or the task already has an address
EXIT_NOT_FOUND = 4  # no such key or event, an expired or deleted address, or no address saved for the task
EXIT_INTERRUPTED = 130  # Ctrl-C

_EXIT_BY_CODE = {
    "invalid_request": EXIT_USAGE,
    "invalid_json": EXIT_USAGE,
    "revision_conflict": EXIT_CONFLICT,
    "idempotency_key_reused": EXIT_CONFLICT,
    "not_found": EXIT_NOT_FOUND,
    "unauthorized": EXIT_NOT_FOUND,
    "wrong_code": EXIT_USAGE,
    "unknown_recipient": EXIT_NOT_FOUND,
    "target_refused": EXIT_USAGE,
    "subscription_limit_exceeded": EXIT_CONFLICT,
    "subscription_not_found": EXIT_NOT_FOUND,
    # The framework stores' compare-and-set refusals: read again, then decide.
    "checkpoint_stale": EXIT_CONFLICT,
    "checkpoint_thread_exists": EXIT_CONFLICT,
    "store_version_conflict": EXIT_CONFLICT,
    "session_conflict": EXIT_CONFLICT,
}

DEFAULT_URL = "http://127.0.0.1:8787"
# Events `events ack` reads between the cursor and an event acknowledged out of order.
ACK_LOOKBACK = 100


class CommandError(Exception):
    """A failure found before or beside the server, with its code and exit status."""

    def __init__(self, code: str, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.exit_code = exit_code


@dataclass(frozen=True)
class Context:
    tasks: TaskStore
    http: HttpClient

    def address(self, task: str) -> Address:
        try:
            return self.tasks.load(task, http=self.http)
        except FileNotFoundError as error:
            raise CommandError(
                "unknown_task", f"No address saved for task {task!r}; run: cairn provision {task}", EXIT_NOT_FOUND
            ) from error
        except ValueError as error:  # not JSON, not UTF-8, or not an address
            path = self.tasks.address_path(task)
            raise CommandError("unreadable_task", f"{path} holds no saved address: {error}", EXIT_USAGE) from error


Handler = Callable[[argparse.Namespace, Context], Any]


def url_option() -> argparse.ArgumentParser:
    """A parent parser with `--url`: the server, by default `CAIRN_URL` or the local one."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--url",
        default=os.environ.get("CAIRN_URL", DEFAULT_URL),
        help=f"Cairn server (default: CAIRN_URL or {DEFAULT_URL})",
    )
    return parent


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the agent commands to the `cairn` parser; each sets `handler`."""
    url = url_option()

    provision = commands.add_parser("provision", parents=[url], help="create an address for a task and keep it")
    provision.add_argument("task", help="task name; one address per task")
    provision.add_argument("--expires-in", type=int, metavar="SECONDS", help="lifetime (default: never expires)")
    provision.set_defaults(handler=run_provision)

    state = commands.add_parser("state", help="read and write the task's durable JSON state")
    state_commands = state.add_subparsers(dest="state_command", required=True)
    get = state_commands.add_parser("get", help="read one key")
    get.add_argument("task")
    get.add_argument("key")
    get.set_defaults(handler=run_state_get)
    put = state_commands.add_parser("set", help="write one key (compare-and-set with --if-revision)")
    put.add_argument("task")
    put.add_argument("key")
    put.add_argument("value", help="JSON value, or - to read it from stdin")
    put.add_argument("--if-revision", type=int, help="0: create only; N: only if the key is at revision N")
    put.set_defaults(handler=run_state_set)
    delete = state_commands.add_parser("delete", help="delete one key")
    delete.add_argument("task")
    delete.add_argument("key")
    delete.add_argument("--if-revision", type=int, help="only if the key is at revision N")
    delete.set_defaults(handler=run_state_delete)
    keys = state_commands.add_parser("keys", help="list keys and usage")
    keys.add_argument("task")
    keys.set_defaults(handler=run_state_keys)

    events = commands.add_parser("events", help="read and acknowledge the task's event feed")
    event_commands = events.add_subparsers(dest="events_command", required=True)
    poll = event_commands.add_parser("poll", help="events after the saved cursor (or --after)")
    poll.add_argument("task")
    poll.add_argument("--after", type=int, help="sequence to read after (default: the saved cursor)")
    poll.add_argument("--wait", type=float, default=0, help=f"seconds to wait for a first event (0-{MAX_WAIT})")
    poll.add_argument("--limit", type=int, help="most events to return")
    poll.set_defaults(handler=run_events_poll)
    follow = event_commands.add_parser(
        "follow", help="print each new event as a JSON line, acknowledge it and save the cursor"
    )
    follow.add_argument("task")
    follow.add_argument("--wait", type=float, default=MAX_WAIT, help=f"long-poll seconds (default {MAX_WAIT})")
    follow.add_argument("--max-events", type=int, help="stop after this many events (default: until Ctrl-C)")
    follow.add_argument(
        "--stream", action="store_true", help="receive over server-sent events (long-polls if the server cannot)"
    )
    follow.set_defaults(handler=run_events_follow)
    ack = event_commands.add_parser("ack", help="acknowledge an event and move the saved cursor past it")
    ack.add_argument("task")
    ack.add_argument("event_id")
    ack.set_defaults(handler=run_events_ack)

    inbox = commands.add_parser("inbox", help="deliver to the task's inbox")
    inbox_commands = inbox.add_subparsers(dest="inbox_command", required=True)
    post = inbox_commands.add_parser("post", help="post one JSON payload, as a worker would")
    post.add_argument("task")
    post.add_argument("payload", help="JSON payload, or - to read it from stdin")
    post.add_argument("--idempotency-key", help="repeat with the same key to deliver at most once")
    post.set_defaults(handler=run_inbox_post)

    mail = commands.add_parser("mail", help="write back by email: verified contacts and plain-text sends")
    mail_commands = mail.add_subparsers(dest="mail_command", required=True)
    contacts = mail_commands.add_parser("contacts", help="list contacts and whether the server sends mail")
    contacts.add_argument("task")
    contacts.set_defaults(handler=run_mail_contacts)
    add = mail_commands.add_parser("add-contact", help="mail a six-digit code to a person")
    add.add_argument("task")
    add.add_argument("email")
    add.set_defaults(handler=run_mail_add_contact)
    verify = mail_commands.add_parser("verify-contact", help="confirm a contact with the code they received")
    verify.add_argument("task")
    verify.add_argument("email")
    verify.add_argument("code")
    verify.set_defaults(handler=run_mail_verify_contact)
    remove = mail_commands.add_parser("remove-contact", help="remove a contact")
    remove.add_argument("task")
    remove.add_argument("email")
    remove.set_defaults(handler=run_mail_remove_contact)
    send = mail_commands.add_parser("send", help="send plain text to one verified contact")
    send.add_argument("task")
    send.add_argument("to")
    send.add_argument("text", help="the message, or - to read it from stdin")
    send.add_argument("--subject", help="one line (default when replying: Re: <subject of the mail answered>)")
    send.add_argument("--reply-to", metavar="EVENT_ID", help="an email.received event to answer in its thread")
    send.add_argument(
        "--idempotency-key", required=True, help="repeat with the same key after a failure: never mails twice"
    )
    send.set_defaults(handler=run_mail_send)
    subscriptions = commands.add_parser("subscriptions", help="push the task's new events to a webhook or AWS target")
    subscription_commands = subscriptions.add_subparsers(dest="subscriptions_command", required=True)
    create = subscription_commands.add_parser(
        "create", help="subscribe a target; a webhook's secret is printed this once"
    )
    create.add_argument("task")
    target = create.add_mutually_exclusive_group(required=True)
    target.add_argument("--webhook", metavar="URL", help="an https URL to POST each event to")
    target.add_argument(
        "--durable-callback",
        metavar="CALLBACK_ID",
        help="a Lambda durable function's callback id: the next matching event resumes it, once",
    )
    target.add_argument("--target", metavar="JSON", help='any target, e.g. {"kind": "sqs", "queue_url": "..."}')
    create.add_argument("--type", action="append", dest="types", help="deliver only this event type (repeatable)")
    create.add_argument("--description", help="what the subscription is for")
    create.set_defaults(handler=run_subscriptions_create)
    listing = subscription_commands.add_parser("list", help="subscriptions with their state and recent attempts")
    listing.add_argument("task")
    listing.set_defaults(handler=run_subscriptions_list)
    remove = subscription_commands.add_parser("delete", help="stop deliveries to a subscription")
    remove.add_argument("task")
    remove.add_argument("subscription_id")
    remove.set_defaults(handler=run_subscriptions_delete)

    files = commands.add_parser("files", help="keep files in the task's address: bytes under keys")
    file_commands = files.add_subparsers(dest="files_command", required=True)
    write = file_commands.add_parser("write", help="store a file's bytes under a key, replacing it whole")
    write.add_argument("task")
    write.add_argument("key")
    write.add_argument("path", nargs="?", default="-", help="the file to store (default: stdin)")
    write.set_defaults(handler=run_files_write)
    read = file_commands.add_parser("read", help="print a file's bytes as stored (not JSON)")
    read.add_argument("task")
    read.add_argument("key")
    read.set_defaults(handler=run_files_read)
    listing = file_commands.add_parser("list", help="every key that starts with a prefix")
    listing.add_argument("task")
    listing.add_argument("prefix", nargs="?", default="")
    listing.set_defaults(handler=run_files_list)
    remove = file_commands.add_parser("delete", help="remove a file (no error when there is none)")
    remove.add_argument("task")
    remove.add_argument("key")
    remove.set_defaults(handler=run_files_delete)


def run(args: argparse.Namespace) -> int:
    """Run the chosen command: its answer on stdout, a failure on stderr, an exit code."""
    handler: Handler = args.handler
    try:
        with HttpClient() as http:
            answer = handler(args, Context(TaskStore.from_environment(), http))
    except CommandError as error:
        return _fail(error.exit_code, {"code": error.code, "message": error.message})
    except (CairnError, UnsafeFile) as error:
        return report(error)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _reader_gone()
    except UnicodeError as error:
        # Arguments or input that are not UTF-8 (Python keeps such bytes as lone surrogates).
        return _fail(EXIT_USAGE, {"code": "invalid_request", "message": f"Not UTF-8 text: {error}."})
    except OSError as error:
        # The machine's side: a full disk, a task folder that is a file, a file that cannot be read.
        return _fail(EXIT_FAILED, {"code": "local_error", "message": f"{type(error).__name__}: {error}"})
    if answer is not None:
        try:
            print(_json(answer, indent=2))
        except BrokenPipeError:
            return _reader_gone()
    return EXIT_OK


def _reader_gone() -> int:
    """What reads stdout has stopped (`cairn … | head`): stop quietly, as other commands do."""
    # Python would flush stdout again at exit and report the same broken pipe.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_FAILED


def run_provision(args: argparse.Namespace, context: Context) -> dict[str, Any]:
    if context.tasks.exists(args.task):
        raise CommandError("task_exists", f"Task {args.task!r} already has an address.", EXIT_CONFLICT)
    # Before the address exists: its read token is shown once, so nowhere to keep it would lose it.
    context.tasks.prepare()
    address = Address.provision(
        args.url, task_id=args.task, name=args.task, expires_in=args.expires_in, http=context.http
    )
    try:
        path = context.tasks.save(args.task, address)
    except BaseException as error:
        # Kept nowhere, the address is of no use to anyone: give it back, then say why.
        if not _kept(context.tasks, args.task, address):
            with suppress(CairnError):
                address.delete()
        if isinstance(error, FileExistsError):
            message = f"Task {args.task!r} got an address meanwhile."
            raise CommandError("task_exists", message, EXIT_CONFLICT) from error
        raise
    return {
        "task": args.task,
        "address_id": address.id,
        "email": address.email,
        "expires_at": address.expires_at,
        "inbox_url": address.inbox_url,
        "events_url": address.events_url,
        "state_url": address.state_url,
        "credentials_file": str(path),
        "note": "The read token is kept in credentials_file (owner-only) and never printed. "
        "inbox_url is write-only: hand it to whoever should call back.",
    }


def _kept(tasks: TaskStore, task: str, address: Address) -> bool:
    """Whether the task's file holds `address` after all (a save interrupted once it was in place)."""
    try:
        saved = json.loads(read_private(tasks.address_path(task)))
        return isinstance(saved, dict) and saved.get("address", {}).get("id") == address.id
    except (OSError, ValueError, UnsafeFile, AttributeError):
        return False


def run_state_get(args: argparse.Namespace, context: Context) -> Any:
    return context.address(args.task).state.get(args.key)


def run_state_set(args: argparse.Namespace, context: Context) -> Any:
    value = _json_argument(args.value)
    return context.address(args.task).state.set(args.key, value, if_revision=args.if_revision)


def run_state_delete(args: argparse.Namespace, context: Context) -> Any:
    return context.address(args.task).state.delete(args.key, if_revision=args.if_revision)


def run_state_keys(args: argparse.Namespace, context: Context) -> Any:
    return context.address(args.task).state.keys()


def run_events_poll(args: argparse.Namespace, context: Context) -> dict[str, Any]:
    address = context.address(args.task)
    after = args.after if args.after is not None else context.tasks.cursor(args.task).read()
    with _waiting(args.wait > 0):
        page = address.events.poll(after=after, wait=args.wait, limit=args.limit)
    return {"task": args.task, "after": after, **page}


def run_events_follow(args: argparse.Namespace, context: Context) -> None:
    address = context.address(args.task)
    follower = address.events.follow(
        cursor_file=context.tasks.cursor(args.task).path, wait=args.wait, stream=args.stream
    )
    printed = 0
    while True:
        # Asking for the next event acknowledges the one printed before it.
        with _waiting(True):
            event = next(follower, None)
        if event is None:
            return
        print(_json(event), flush=True)
        printed += 1
        if printed == args.max_events:
            follower.stop()


def run_events_ack(args: argparse.Namespace, context: Context) -> dict[str, Any]:
    address = context.address(args.task)
    acknowledged = address.events.ack(args.event_id)
    cursor_file = context.tasks.cursor(args.task)
    handled = _acknowledged_through(address, cursor_file.read(), acknowledged["event"]["sequence"])
    return {**acknowledged, "cursor": cursor_file.advance(handled)}


def _acknowledged_through(address: Address, cursor: int, sequence: int) -> int:
    """How far the cursor may move once `sequence` is acknowledged: not past an earlier event still unacknowledged.

    The cursor is where `events poll` and `follow` start: moved past an event
    nobody acknowledged (the agent handled a later one first), it would hide
    that event from every later run.
    """
    if sequence <= cursor + 1:
        return sequence
    # Through the acknowledged event itself, so a page that reaches it says nothing is left before it.
    page = address.events.poll(after=cursor, limit=min(sequence - cursor, ACK_LOOKBACK))
    for event in page["events"]:
        if event["sequence"] >= sequence:
            return sequence
        if event.get("acknowledged_at") is None:
            return event["sequence"] - 1
    if page["events"] and page.get("has_more"):
        return page["events"][-1]["sequence"]  # the rest is looked at by the next acknowledgement
    return sequence


def run_inbox_post(args: argparse.Namespace, context: Context) -> Any:
    payload = _json_argument(args.payload)
    return context.address(args.task).inbox.post(payload, idempotency_key=args.idempotency_key)


def run_mail_contacts(args: argparse.Namespace, context: Context) -> Any:
    return context.address(args.task).email.contacts()


def run_mail_add_contact(args: argparse.Namespace, context: Context) -> Any:
    return context.address(args.task).email.add_contact(args.email)


def run_mail_verify_contact(args: argparse.Namespace, context: Context) -> Any:
    return context.address(args.task).email.verify_contact(args.email, args.code)


def run_mail_remove_contact(args: argparse.Namespace, context: Context) -> dict[str, Any]:
    context.address(args.task).email.remove_contact(args.email)
    return {"email": args.email, "removed": True}


def run_mail_send(args: argparse.Namespace, context: Context) -> Any:
    text = sys.stdin.read() if args.text == "-" else args.text
    return context.address(args.task).email.send(
        args.to, text, subject=args.subject, reply_to_event_id=args.reply_to, idempotency_key=args.idempotency_key
    )


def run_subscriptions_create(args: argparse.Namespace, context: Context) -> Any:
    if args.webhook:
        target = {"kind": "webhook", "url": args.webhook}
    elif args.durable_callback:
        target = {"kind": "lambda_durable_callback", "callback_id": args.durable_callback}
    else:
        target = _json_argument(args.target)
    return context.address(args.task).subscriptions.create(target, types=args.types, description=args.description)


def run_subscriptions_list(args: argparse.Namespace, context: Context) -> Any:
    return {"subscriptions": context.address(args.task).subscriptions.list()}


def run_subscriptions_delete(args: argparse.Namespace, context: Context) -> Any:
    context.address(args.task).subscriptions.delete(args.subscription_id)
    return {"subscription_id": args.subscription_id, "deleted": True}


def run_files_write(args: argparse.Namespace, context: Context) -> Any:
    address = context.address(args.task)
    try:
        data = sys.stdin.buffer.read() if args.path == "-" else Path(args.path).read_bytes()
    except OSError as error:
        raise CommandError("invalid_request", f"Cannot read {args.path}: {error.strerror}", EXIT_USAGE) from error
    return address.files.write(args.key, data)


def run_files_read(args: argparse.Namespace, context: Context) -> None:
    data = context.address(args.task).files.read(args.key)
    if data is None:
        raise CommandError("not_found", f"No file under {args.key!r}.", EXIT_NOT_FOUND)
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def run_files_list(args: argparse.Namespace, context: Context) -> dict[str, Any]:
    return {"keys": list(context.address(args.task).files.keys(args.prefix))}


def run_files_delete(args: argparse.Namespace, context: Context) -> dict[str, Any]:
    return {"key": args.key, "deleted": context.address(args.task).files.delete(args.key)}


def _json_argument(text: str) -> Any:
    try:
        return json.loads(sys.stdin.read() if text == "-" else text)
    except ValueError as error:
        raise CommandError("invalid_json", f"Not valid JSON: {error}.", EXIT_USAGE) from error


@contextmanager
def _waiting(long_poll: bool) -> Iterator[None]:
    """A spinner on stderr while a long-poll waits, only when a person watches the terminal."""
    if not (long_poll and sys.stderr.isatty()):
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status("Waiting for events…"):
        yield


def report(error: CairnError | UnsafeFile) -> int:
    """Print a refusal (the server's, or an unsafe credential file) as `{"error": …}` on stderr; its exit code."""
    if isinstance(error, UnsafeFile):
        return _fail(EXIT_USAGE, {"code": "unsafe_file", "message": str(error)})
    exit_code = _EXIT_BY_CODE.get(error.code, EXIT_FAILED)
    return _fail(exit_code, {"code": error.code, "message": error.message, **error.details})


def _fail(exit_code: int, error: dict[str, Any]) -> int:
    print(_json({"error": error}), file=sys.stderr)
    return exit_code


def _json(value: Any, *, indent: int | None = None) -> str:
    """JSON in ASCII: what strangers wrote (events, mail) reaches a terminal as escapes, never as C1 controls
    or bidirectional overrides it would act on, and prints on a terminal or pipe of any encoding (a
    character Latin-1 lacks had stopped `follow` at that event on every run)."""
    return json.dumps(value, indent=indent, ensure_ascii=True)
