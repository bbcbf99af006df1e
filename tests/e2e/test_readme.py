"""The docs are scripts that work: the README's tour, the site's tour and skill.md, run as written on `cairn serve`.

The README's ten-line tour runs on its own. The site's tour (`docs/tour.md`,
then the shell and Python blocks of the pages it continues on: state and
inbox callbacks, email in and out, wake-ups, the runtime store and product
memory, the SDK and the `cairn` commands; `tests/support/docs.py` lists them)
runs in order in one shell; only the values the text says to change are
changed (`BASE`, `SMTP_PORT`, `OUTBOX`, `WAKE_URL`, the runtime key's path, the
runtime store's and the SDK's URL, and `CAIRN_URL` for the `cairn` commands). The server ends event streams after
2 s, as the tour says the test configures it. skill.md's blocks run with the
placeholders it names (`<id>`, `<event_id>`, `$READ_TOKEN`) filled in. Every
`curl` answer is checked for its status and shape, in order.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import re
import smtplib
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest

from cairn.client import Address
from cairn.local.dynamodb_local import DynamoDBLocal
from tests.support.docs import Block, readme_tour, tour_blocks
from tests.support.serve import ServeProcess

ROOT = Path(__file__).resolve().parents[2]
# Each curl answer goes to the log as "<status> <base64 body>"; the command still prints the body.
CURL_RECORDER = r"""
curl() {
  local out status body
  out=$(command curl -w '\n%{http_code}' "$@")
  status=${out##*$'\n'}
  body=${out%$'\n'*}
  printf '%s %s\n' "$status" "$(printf '%s' "$body" | base64 -w0)" >> "$CURL_LOG"
  printf '%s\n' "$body"
}
"""


@pytest.fixture
def served(dynamodb_local: DynamoDBLocal, streamed_table: str, tmp_path: Path) -> Iterator[ServeProcess]:
    """`cairn serve` whose event streams end after 2 s, so the tour's `curl -N` returns."""
    env = {"CAIRN_MAX_STREAM_SECONDS": "2"}
    with ServeProcess(tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, env=env) as server:
        yield server


class WakeReceiver:
    """A webhook on 127.0.0.1 that answers 204 and keeps each delivery's body."""

    def __init__(self) -> None:
        received = self.received = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/wake"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def receiver() -> Iterator[WakeReceiver]:
    hook = WakeReceiver()
    yield hook
    hook.close()


def as_shell(block: Block) -> str:
    """A block as a line of the script: shell as it is, Python through the interpreter the shell finds."""
    return f"python3 - <<'PY'\n{block.text}PY\n" if block.language == "python" else block.text


def docs_script(served: ServeProcess, wake_url: str) -> str:
    """The site's tour and the pages it continues on, as one script."""
    blocks = tour_blocks()
    assert [block.page.removeprefix("docs/") for block in blocks] == [
        "tour.md",
        "addresses.md",  # state
        "addresses.md",  # inbox callbacks
        "email.md",  # mail in
        "email.md",  # mail out
        "wakeups.md",
        "runtime.md",  # the runtime store
        "runtime.md",  # product memory
        "agent-tools.md",  # the SDK
        "agent-tools.md",  # the `cairn` commands
    ], [str(block) for block in blocks]
    script = "\n".join(as_shell(block) for block in blocks)
    for documented, here in [
        ("BASE=http://127.0.0.1:8787\n", f"BASE={served.base_url}\n"),
        ("SMTP_PORT=2525 ", f"SMTP_PORT={served.smtp_port} "),
        ("OUTBOX=.cairn/data/outbox ", f"OUTBOX={served.data_dir / 'outbox'} "),
        ("WAKE_URL=https://agent.example.com/wake ", f"WAKE_URL={wake_url} "),
        ("RUNTIME_KEY=$(cat .cairn/data/runtime-key) ", f"RUNTIME_KEY=$(cat {served.data_dir / 'runtime-key'}) "),
        ('Path(".cairn/data/runtime-key")', f'Path("{served.data_dir / "runtime-key"}")'),
        ('HttpRuntimeStore("http://127.0.0.1:8787", ', f'HttpRuntimeStore("{served.base_url}", '),
        ('Address.provision("http://127.0.0.1:8787", ', f'Address.provision("{served.base_url}", '),
    ]:
        assert script.count(documented) == 1, documented
        script = script.replace(documented, here)
    return script


def run(script: str, workdir: Path, served: ServeProcess, **env: str) -> tuple[str, list[tuple[int, Any]]]:
    """Run `script` in bash (stop at the first failing command); its stdout and each curl answer."""
    log = workdir / "curl.log"
    log.write_text("")
    environment = {
        **os.environ,
        "CURL_LOG": str(log),
        "CAIRN_URL": served.base_url,
        "CAIRN_HOME": str(workdir / "cairn-home"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)]),
        **env,
    }
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + CURL_RECORDER + script],
        cwd=workdir,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    answers = []
    for line in log.read_text().splitlines():
        status, _, encoded = line.partition(" ")
        body = base64.b64decode(encoded)
        try:
            answers.append((int(status), json.loads(body)))
        except ValueError:
            answers.append((int(status), body))
    return done.stdout, answers


def keys(*names: str) -> Callable[[Any], bool]:
    return lambda body: isinstance(body, dict) and set(names) <= set(body)


def error(code: str) -> Callable[[Any], bool]:
    return lambda body: body["error"]["code"] == code


DOCS_ANSWERS: list[tuple[str, int, Callable[[Any], bool]]] = [
    ("provision", 201, keys("address", "credentials", "endpoints")),
    ("inbox post", 202, lambda body: body["duplicate"] is False and body["event"]["sequence"] == 1),
    ("long-poll", 200, lambda body: body["events"][0]["data"] == {"status": "green"} and body["next_cursor"] == 1),
    ("ack", 200, lambda body: body["event"]["acknowledged_at"]),
    ("event stream", 200, lambda body: b"id: 1\nevent: build.completed\n" in body),
    ("trim", 200, lambda body: body == {"trimmed": 1, "trimmed_through": 1}),
    ("describe", 200, keys("address", "feed", "state", "endpoints")),
    ("state create", 201, lambda body: body["revision"] == 1),
    ("state compare-and-set", 200, lambda body: body["revision"] == 2),
    ("state get", 200, lambda body: body["value"] == {"step": 2}),
    ("state keys", 200, lambda body: [key["key"] for key in body["keys"]] == ["progress"]),
    ("state delete", 200, lambda body: body == {"key": "progress", "deleted": True, "revision": 3}),
    ("state batch", 200, lambda body: [result["revision"] for result in body["results"]] == [1, 4]),
    ("keep headers", 200, lambda body: body["inbox"]["keep_headers"] == ["x-github-event", "x-github-delivery"]),
    ("github verifier", 201, lambda body: body["inbox"]["verifiers"][0]["kind"] == "github"),
    ("unsigned post", 401, error("signature_invalid")),
    ("signed post", 202, keys("duplicate", "event")),
    ("inbox settings", 200, lambda body: "my-github-webhook-secret" not in json.dumps(body)),
    ("verifier removed", 200, lambda body: body["inbox"]["verifiers"] == []),
    ("feed with mail", 200, lambda body: body["events"][-1]["type"] == "email.received"),
    ("attachment", 200, lambda body: body == b""),  # written to invoice.pdf
    ("replay", 200, lambda body: body["duplicate"] is True),
    ("ask for a code", 202, lambda body: body["contact"]["status"] == "pending" and body["code_sent"] is True),
    ("verify the code", 200, lambda body: body["status"] == "verified"),
    (
        "contacts",
        200,
        lambda body: [c["status"] for c in body["contacts"]] == ["verified"] and body["outbound_configured"],
    ),
    ("send", 202, lambda body: body["status"] == "accepted" and body["duplicate"] is False),
    ("remove contact", 200, lambda body: body == {"email": "ada@example.org", "removed": True}),
    ("subscribe", 201, lambda body: body["secret"].startswith("whsec_") and body["subscription"]["status"] == "active"),
    ("test delivery", 200, lambda body: body["attempt"]["outcome"] == "delivered"),
    ("subscriptions", 200, lambda body: len(body["subscriptions"]) == 1),
    ("rotate", 200, lambda body: body["secret"].startswith("whsec_")),
    ("unsubscribe", 200, lambda body: body["deleted"] is True),
    ("delete", 200, lambda body: body["deleted"] is True),
    ("memory append", 201, lambda body: body["sequences"] == [1]),
    ("memory read", 200, lambda body: [event["data"] for event in body["events"]] == [{"message": "Summarize sales"}]),
]

README_ANSWERS: list[tuple[str, int, Callable[[Any], bool]]] = [
    ("provision", 201, keys("address", "credentials", "endpoints")),
    ("inbox post", 202, lambda body: body["duplicate"] is False and body["event"]["sequence"] == 1),
    ("long-poll", 200, lambda body: [event["type"] for event in body["events"]] == ["build.completed"]),
    ("state create", 201, lambda body: body["revision"] == 1),
]


def check(expected: list[tuple[str, int, Callable[[Any], bool]]], answers: list[tuple[int, Any]]) -> None:
    assert len(answers) == len(expected), [status for status, _ in answers]
    for (name, status, shape), (got_status, body) in zip(expected, answers, strict=True):
        assert got_status == status, (name, body)
        assert shape(body), (name, body)


def test_the_readme_and_the_docs_tours_run_as_written(served: ServeProcess, receiver: WakeReceiver, tmp_path: Path):
    tour = readme_tour()  # on the same server, in a folder of its own
    assert len(tour.text.splitlines()) <= 12, "the README's tour is about ten lines"
    assert tour.text.count("BASE=http://127.0.0.1:8787\n") == 1, "the README's tour starts from BASE"
    (tmp_path / "readme").mkdir()
    _, answers = run(
        tour.text.replace("BASE=http://127.0.0.1:8787\n", f"BASE={served.base_url}\n"), tmp_path / "readme", served
    )
    check(README_ANSWERS, answers)

    stdout, answers = run(docs_script(served, receiver.url), tmp_path, served)
    check(DOCS_ANSWERS, answers)
    assert (tmp_path / "invoice.pdf").read_bytes() == b"%PDF-1.4 invoice 31"
    signed_event = answers[2][1]["events"][0]  # the tour's own event; the signed one is checked below
    assert signed_event["content_type"] == "application/json"
    assert Address.restore(tmp_path / "nightly.json").state.get("progress")["value"] == {"step": 2}, "the SDK block"
    assert "['run_started', 'planner_note', 'run_completed']" in stdout, "the runtime store block"
    followed = [json.loads(line) for line in stdout.splitlines()[-2:]]  # the script ends with `follow`
    assert [event["type"] for event in followed] == ["state.updated", "build.done"], "cairn events follow"
    assert [delivery["type"] for delivery in receiver.received] == ["subscription.test"], "the tour's test delivery"
    sent = sorted((served.data_dir / "outbox").glob("*.eml"), key=lambda path: path.stat().st_mtime)
    assert [b"Subject: Pay invoice 42?" in mail.read_bytes() for mail in sent].count(True) == 1
    assert [b"Subject: Report" in mail.read_bytes() for mail in sent].count(True) == 1


def test_the_docs_mark_the_signed_callback(served: ServeProcess, receiver: WakeReceiver, tmp_path: Path):
    """The tour and the callback block alone: the signed post's event is verified and keeps its header."""
    script = docs_script(served, receiver.url)
    script = (
        script[: script.index("SMTP_PORT=")] + 'curl -s "$EVENTS_URL?after=0" -H "Authorization: Bearer $READ_TOKEN"\n'
    )
    _, answers = run(script, tmp_path, served)
    events = answers[-1][1]["events"]
    signed = events[-1]
    assert (signed["type"], signed["verified_by"], signed["headers"]) == (
        "github.pull_request",
        "github",
        {"x-github-event": "pull_request"},
    )


def indented_blocks(text: str) -> list[str]:
    """Markdown's indented code blocks, as shell text."""
    return [
        "\n".join(line[4:] for line in block.splitlines()) for block in re.findall(r"(?:^    .*\n)+", text, flags=re.M)
    ]


def test_skill_md_runs_as_written(served: ServeProcess, receiver: WakeReceiver, tmp_path: Path):
    guide = httpx.get(f"{served.base_url}/skill.md").text
    provision, poll, ack, state, attachment, send, subscribe = indented_blocks(guide)
    _, [(status, created)] = run(provision, tmp_path, served)
    assert status == 201
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    # The other party calls back; then a mail with an attachment arrives.
    assert (
        httpx.post(created["endpoints"]["inbox_url"], json={"type": "render.completed", "data": {}}).status_code == 202
    )
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = "billing@example.com", created["address"]["email"], "Invoice"
    mail.set_content("attached")
    mail.add_attachment(b"invoice bytes", maintype="application", subtype="pdf", filename="invoice.pdf")
    with smtplib.SMTP("127.0.0.1", served.smtp_port) as smtp:
        smtp.send_message(mail)

    def filled(block: str, event_id: str = "") -> str:
        return block.replace("<id>", address_id).replace("<event_id>", event_id)

    _, [(status, page)] = run(filled(poll), tmp_path, served, READ_TOKEN=token)
    assert status == 200 and [event["type"] for event in page["events"]] == ["render.completed", "email.received"]
    callback, mail_event = page["events"]
    _, [(status, acked)] = run(filled(ack, callback["id"]), tmp_path, served, READ_TOKEN=token)
    assert status == 200 and acked["event"]["id"] == callback["id"]
    _, [(status, written)] = run(filled(state), tmp_path, served, READ_TOKEN=token)
    assert (status, written["revision"]) == (201, 1)
    _, [(status, _)] = run(filled(attachment, mail_event["id"]), tmp_path, served, READ_TOKEN=token)
    assert status == 200 and (tmp_path / "file").read_bytes() == b"invoice bytes"

    # Writing back: the person verifies with the code mailed to them, then the agent's send block runs.
    bearer = {"Authorization": f"Bearer {token}"}
    contacts = f"{served.base_url}/api/v1/addresses/{address_id}/email/contacts"
    assert httpx.post(contacts, json={"email": "person@example.org"}, headers=bearer).status_code == 202
    [code_mail] = (served.data_dir / "outbox").glob("*.eml")
    found = re.search(rb"code is: (\d{6})", code_mail.read_bytes())
    assert found, "the verification mail carries its code"
    code = found.group(1).decode()
    assert httpx.post(contacts, json={"email": "person@example.org", "code": code}, headers=bearer).status_code == 200
    _, [(status, sent)] = run(filled(send), tmp_path, served, READ_TOKEN=token)
    assert (status, sent["status"]) == (202, "accepted")
    # Wake-ups: the runner's URL is the one value to put in.
    wake = filled(subscribe).replace("https://your-runner.example.com/wake", receiver.url)
    _, [(status, subscribed)] = run(wake, tmp_path, served, READ_TOKEN=token)
    assert status == 201 and subscribed["subscription"]["types"] == ["email.received"]
