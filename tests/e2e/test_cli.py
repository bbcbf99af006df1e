"""The `cairn` agent commands, run as processes against `cairn serve`."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cairn import cli as cairn_cli
from cairn.client import Address, Unauthorized
from cairn.client.tasks import TaskStore
from tests.support.serve import ServeProcess, run_command

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    @property
    def error(self) -> dict[str, Any]:
        return json.loads(self.stderr)["error"]


@dataclass
class Cli:
    home: Path
    url: str
    outputs: list[str]

    def __call__(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> Run:
        done = run_command(list(args), self._environment(env), (stdin or "").encode())
        stdout, stderr = done.stdout.decode(), done.stderr.decode()
        self.outputs += [stdout, stderr]
        return Run(done.returncode, stdout, stderr)

    def raw(self, *args: str) -> bytes:
        """What a command printed, as bytes (`files read` prints a file's own)."""
        done = run_command(list(args), self._environment())
        assert done.returncode == 0, done.stderr
        return done.stdout

    def _environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The test's environment with this home and server, as a user who set them would run the command."""
        return {**os.environ, "CAIRN_HOME": str(self.home), "CAIRN_URL": self.url, **(extra or {})}

    def read_token(self, task: str) -> str:
        return Address.restore(TaskStore(self.home).address_path(task)).read_token


@pytest.fixture
def cli(served: ServeProcess, tmp_path: Path) -> Cli:
    return Cli(tmp_path / "cairn-home", served.base_url, [])


def test_a_task_round_trip_never_prints_the_read_token(cli: Cli):
    provisioned = cli("provision", "nightly", "--expires-in", "3600")
    assert provisioned.code == 0, provisioned.stderr
    answer = provisioned.json()
    assert answer["address_id"].startswith("addr_")
    assert answer["inbox_url"].startswith(cli.url)
    tasks = cli.home / "tasks"
    assert stat.S_IMODE(cli.home.stat().st_mode) == 0o700
    assert stat.S_IMODE(tasks.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(answer["credentials_file"]).stat().st_mode) == 0o600

    assert cli("state", "set", "nightly", "plan", '{"step": 1}', "--if-revision", "0").json()["revision"] == 1
    from_stdin = cli("state", "set", "nightly", "plan", "-", "--if-revision", "1", stdin='{"step": 2}')
    assert from_stdin.json()["revision"] == 2
    assert cli("state", "get", "nightly", "plan").json()["value"] == {"step": 2}
    assert [entry["key"] for entry in cli("state", "keys", "nightly").json()["keys"]] == ["plan"]
    delivered = cli("inbox", "post", "nightly", '{"type": "build.done"}', "--idempotency-key", "b1").json()
    assert delivered["duplicate"] is False

    page = cli("events", "poll", "nightly", "--wait", "1").json()
    assert [event["type"] for event in page["events"]] == ["state.updated", "state.updated", "build.done"]
    assert [event["ingress_surface"] for event in page["events"]] == ["state", "state", "http"]
    assert page["after"] == 0
    acked = cli("events", "ack", "nightly", page["events"][0]["id"]).json()
    assert acked["cursor"] == 1
    assert [event["sequence"] for event in cli("events", "poll", "nightly").json()["events"]] == [2, 3]
    assert cli("state", "delete", "nightly", "plan", "--if-revision", "2").json()["deleted"] is True

    token = cli.read_token("nightly")
    assert all(token not in output for output in cli.outputs)


def test_follow_prints_each_event_once_and_acknowledges_it(cli: Cli):
    cli("provision", "worker")
    for n in range(3):
        cli("inbox", "post", "worker", json.dumps({"type": "job.done", "data": {"n": n}}))
    followed = cli("events", "follow", "worker", "--max-events", "2")
    assert followed.code == 0, followed.stderr
    lines = [json.loads(line) for line in followed.stdout.splitlines()]
    assert [event["data"]["n"] for event in lines] == [0, 1]
    rest = cli("events", "follow", "worker", "--max-events", "1", "--wait", "1")
    assert [json.loads(line)["data"]["n"] for line in rest.stdout.splitlines()] == [2]
    events = cli("events", "poll", "worker", "--after", "0").json()["events"]
    assert all(event["acknowledged_at"] for event in events)
    cli("inbox", "post", "worker", json.dumps({"type": "job.done", "data": {"n": 3}}))
    streamed = cli("events", "follow", "worker", "--max-events", "1", "--stream")
    assert [json.loads(line)["data"]["n"] for line in streamed.stdout.splitlines()] == [3], streamed.stderr


def test_what_strangers_wrote_prints_as_ascii_on_any_terminal_and_follow_goes_on(cli: Cli):
    """A character Latin-1 lacks stopped `follow` at that event on every run (a traceback, no acknowledgement);
    C1 controls and bidirectional overrides reached the terminal as they were."""
    cli("provision", "worker")
    data = {"subject": "\u202e ☃ \u009b2J", "n": 1}
    cli("inbox", "post", "worker", json.dumps({"type": "mail.like\u009b31m", "data": data}))
    latin = {"PYTHONIOENCODING": "latin-1"}
    followed = cli("events", "follow", "worker", "--max-events", "1", env=latin)
    assert followed.code == 0, followed.stderr
    assert followed.stdout.isascii()
    [event] = [json.loads(line) for line in followed.stdout.splitlines()]
    assert (event["type"], event["data"]) == ("mail.like\u009b31m", data)
    polled = cli("events", "poll", "worker", "--after", "0", env=latin)
    assert polled.code == 0 and polled.stdout.isascii() and polled.json()["events"][0]["acknowledged_at"]


def test_exit_codes_tell_what_to_do_next(cli: Cli):
    assert cli("provision", "job").code == 0
    exists = cli("provision", "job")
    assert (exists.code, exists.error["code"]) == (3, "task_exists")
    unknown = cli("state", "get", "nobody", "plan")
    assert (unknown.code, unknown.error["code"]) == (4, "unknown_task")
    missing = cli("state", "get", "job", "plan")
    assert (missing.code, missing.error["code"]) == (4, "not_found")
    cli("state", "set", "job", "plan", "1")
    conflict = cli("state", "set", "job", "plan", "2", "--if-revision", "0")
    assert (conflict.code, conflict.error["code"], conflict.error["current_revision"]) == (3, "revision_conflict", 1)
    invalid = cli("state", "set", "job", "plan", "{not json")
    assert (invalid.code, invalid.error["code"]) == (2, "invalid_json")
    bad_key = cli("state", "set", "job", "no spaces", "1")
    assert (bad_key.code, bad_key.error["code"]) == (2, "invalid_request")
    assert cli("events", "poll").code == 2
    unreachable = Cli(cli.home, "http://127.0.0.1:9", [])("provision", "elsewhere")
    assert (unreachable.code, unreachable.error["code"]) == (1, "connection_failed")


def test_acknowledging_out_of_order_never_moves_the_cursor_past_an_unacknowledged_event(cli: Cli):
    cli("provision", "sorter")
    for n in range(1, 4):
        cli("inbox", "post", "sorter", json.dumps({"type": "job.done", "data": {"n": n}}))
    first, second, third = cli("events", "poll", "sorter").json()["events"]
    assert cli("events", "ack", "sorter", third["id"]).json()["cursor"] == 0, "events 1 and 2 still wait"
    assert [event["sequence"] for event in cli("events", "poll", "sorter").json()["events"]] == [1, 2, 3]
    assert cli("events", "ack", "sorter", first["id"]).json()["cursor"] == 1
    # The one acknowledged ahead shows again, marked acknowledged, rather than any event being skipped.
    shown = cli("events", "poll", "sorter").json()["events"]
    assert [(event["sequence"], event["acknowledged_at"] is not None) for event in shown] == [(2, False), (3, True)]
    with Address.restore(TaskStore(cli.home).address_path("sorter")) as address:
        address.events.ack(second["id"])  # by another client: the command's cursor stays
    assert cli("events", "ack", "sorter", third["id"]).json()["cursor"] == 3, "every event before it is acknowledged"


def test_trouble_on_this_machine_is_a_json_error_never_a_traceback(cli: Cli, tmp_path: Path):
    home_is_a_file = tmp_path / "home-file"
    home_is_a_file.write_text("")
    nowhere = cli("provision", "lost", env={"CAIRN_HOME": str(home_is_a_file)})
    assert (nowhere.code, nowhere.error["code"]) == (1, "local_error"), nowhere.stderr

    cli("provision", "local")
    store = TaskStore(cli.home)
    store.cursor("local").path.write_bytes(b"\xff\xfe\n")
    store.cursor("local").path.chmod(0o600)
    cursor = cli("events", "poll", "local")
    assert (cursor.code, cursor.error["code"]) == (2, "unsafe_file")
    not_utf8 = subprocess.run(
        [sys.executable, "-m", "cairn.cli", "state", "set", "local", "plan", "-"],
        env={**os.environ, "CAIRN_HOME": str(cli.home), "CAIRN_URL": cli.url},
        input=b'"\xff"',
        capture_output=True,
        timeout=60,
    )
    assert (not_utf8.returncode, json.loads(not_utf8.stderr)["error"]["code"]) == (2, "invalid_request")
    store.address_path("local").write_text("[]")
    unreadable = cli("state", "keys", "local")
    assert (unreadable.code, unreadable.error["code"]) == (2, "unreadable_task"), unreadable.stderr
    assert "Traceback" not in "".join(cli.outputs)


def test_an_address_that_could_not_be_kept_is_given_back(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """Its read token is shown only once: an address the disk had no room for would be lost to everyone."""
    made: list[Address] = []
    really_save = TaskStore.save

    def disk_full(store: TaskStore, task: str, address: Address) -> Path:
        made.append(address)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setenv("CAIRN_HOME", str(cli.home))
    monkeypatch.setattr(TaskStore, "save", disk_full)
    assert cairn_cli.main(["provision", "full-disk", "--url", cli.url]) == 1
    assert json.loads(capsys.readouterr().err)["error"]["code"] == "local_error"
    [address] = made
    with pytest.raises(Unauthorized), Address.connect(cli.url, address.id, address.read_token) as again:
        again.describe()

    def interrupted(store: TaskStore, task: str, address: Address) -> Path:
        really_save(store, task, address)
        raise KeyboardInterrupt  # Ctrl-C once the file is in place: the address is kept, not given back

    monkeypatch.setattr(TaskStore, "save", interrupted)
    assert cairn_cli.main(["provision", "kept", "--url", cli.url]) == 130
    with Address.restore(TaskStore(cli.home).address_path("kept")) as kept:
        assert kept.describe()["address"]["task_id"] == "kept"


def test_a_reader_that_stops_reading_ends_the_command_quietly(cli: Cli):
    cli("provision", "piped")
    env = {**os.environ, "CAIRN_HOME": str(cli.home), "CAIRN_URL": cli.url}
    command = [sys.executable, "-m", "cairn.cli", "state", "keys", "piped"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # as `| head` does, before the command has printed anything
    assert process.wait(timeout=60) == 1
    assert process.stderr.read() == b""


def test_credential_files_others_could_read_or_swap_are_refused(cli: Cli, tmp_path: Path):
    cli("provision", "private")
    path = TaskStore(cli.home).address_path("private")
    path.chmod(0o644)
    exposed = cli("state", "keys", "private")
    assert (exposed.code, exposed.error["code"]) == (2, "unsafe_file")
    assert "chmod 600" in exposed.error["message"]

    path.chmod(0o600)
    elsewhere = tmp_path / "elsewhere.json"
    path.rename(elsewhere)
    path.symlink_to(elsewhere)
    linked = cli("state", "keys", "private")
    assert (linked.code, linked.error["code"]) == (2, "unsafe_file")


def test_mail_commands_verify_a_contact_and_send(cli: Cli, served: ServeProcess):
    assert cli("provision", "mailer").code == 0
    assert cli("mail", "contacts", "mailer").json() == {"contacts": [], "outbound_configured": True}
    assert cli("mail", "add-contact", "mailer", "ada@example.org").json()["status"] == "pending"
    [mail] = (served.data_dir / "outbox").glob("*.eml")
    code = re.search(rb"code is: (\d{6})", mail.read_bytes()).group(1).decode()
    wrong = cli("mail", "verify-contact", "mailer", "ada@example.org", "000000" if code != "000000" else "111111")
    assert (wrong.code, wrong.error["code"]) == (2, "wrong_code")
    assert cli("mail", "verify-contact", "mailer", "ada@example.org", code).json()["status"] == "verified"
    send = ("mail", "send", "mailer", "ada@example.org", "-", "--subject", "Report", "--idempotency-key", "r1")
    sent = cli(*send, stdin="All done.\n")
    assert sent.code == 0 and sent.json()["status"] == "accepted"
    assert cli(*send, stdin="All done.\n").json()["duplicate"] is True
    reused = cli(*send, stdin="Something else.\n")
    assert (reused.code, reused.error["code"]) == (3, "idempotency_key_reused")
    stranger = cli("mail", "send", "mailer", "bob@example.org", "Hi", "--subject", "x", "--idempotency-key", "r2")
    assert (stranger.code, stranger.error["code"]) == (4, "unknown_recipient")
    assert cli("mail", "remove-contact", "mailer", "ada@example.org").json() == {
        "email": "ada@example.org",
        "removed": True,
    }
    assert all(cli.read_token("mailer") not in output for output in cli.outputs)


def test_subscriptions_are_created_listed_and_deleted(cli: Cli):
    cli("provision", "waker")
    created = cli("subscriptions", "create", "waker", "--webhook", "http://127.0.0.1:9/hook", "--type", "job.done")
    assert created.code == 0, created.stderr
    answer = created.json()
    assert answer["secret"].startswith("whsec_")
    sub_id = answer["subscription"]["id"]
    listed = cli("subscriptions", "list", "waker").json()["subscriptions"]
    assert [(item["id"], item["types"]) for item in listed] == [(sub_id, ["job.done"])]
    assert answer["secret"] not in cli("subscriptions", "list", "waker").stdout
    refused = cli("subscriptions", "create", "waker", "--webhook", "https://169.254.169.254/")
    assert (refused.code, refused.error["code"]) == (2, "target_refused")
    assert cli("subscriptions", "delete", "waker", sub_id).json() == {"subscription_id": sub_id, "deleted": True}
    gone = cli("subscriptions", "delete", "waker", sub_id)
    assert gone.error["code"] == "subscription_not_found"
    assert cli("subscriptions", "list", "waker").json() == {"subscriptions": []}


def test_files_are_written_from_stdin_or_a_path_read_back_byte_for_byte_listed_and_deleted(cli: Cli, tmp_path: Path):
    cli("provision", "filer")
    plan = "# Plan\n1. ship ✓\n"
    written = cli("files", "write", "filer", "notes/plan.md", stdin=plan)
    assert (written.code, written.json()) == (0, {"key": "notes/plan.md", "size": len(plan.encode())}), written.stderr
    picture = tmp_path / "logo.png"
    picture.write_bytes(bytes(range(256)) * 40)
    assert cli("files", "write", "filer", "notes/logo.png", str(picture)).json()["size"] == 10_240

    assert cli.raw("files", "read", "filer", "notes/plan.md") == plan.encode()
    assert cli.raw("files", "read", "filer", "notes/logo.png") == picture.read_bytes()
    assert cli("files", "list", "filer", "notes/").json() == {"keys": ["notes/logo.png", "notes/plan.md"]}
    assert cli("files", "delete", "filer", "notes/logo.png").json() == {"key": "notes/logo.png", "deleted": True}
    missing = cli("files", "read", "filer", "notes/logo.png")
    assert (missing.code, missing.error["code"], missing.stdout) == (4, "not_found", "")
    unreadable = cli("files", "write", "filer", "k", str(tmp_path / "absent"))
    assert (unreadable.code, unreadable.error["code"]) == (2, "invalid_request")
    assert cli("files", "list", "filer").json() == {"keys": ["notes/plan.md"]}
