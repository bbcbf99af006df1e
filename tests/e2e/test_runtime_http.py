"""The runtime store over real HTTP against `cairn serve`."""

from __future__ import annotations

import stat
from pathlib import Path

import httpx
import pytest

from cairn.runtime.errors import RunNotFoundError, RuntimeStoreError, is_error
from cairn.runtime.http import HttpRuntimeStore
from cairn.runtime.model import RunStatus
from tests.contract.builders import T0, note, root_start, terminal
from tests.support.serve import ServeProcess


@pytest.fixture
def keyed_server(dynamodb_local, streamed_table, tmp_path: Path):
    """The key comes from a file: on the command line every local user could read it in the process list."""
    key_file = tmp_path / "runtime-key"
    key_file.write_text("s3cret\n")
    key_file.chmod(0o600)
    with ServeProcess(
        tmp_path,
        dynamodb_endpoint=dynamodb_local.endpoint,
        table=streamed_table,
        extra_args=["--runtime-key-file", str(key_file)],
    ) as server:
        yield server
        assert not (server.data_dir / "runtime-key").exists(), "a given key wins: none is made"


def test_a_key_on_the_command_line_works_with_a_warning(dynamodb_local, streamed_table, tmp_path: Path):
    args = ["--runtime-key", "s3cret"]
    with ServeProcess(
        tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, extra_args=args
    ) as server:
        assert any("process list" in line for line in server.output), server.output
        store = HttpRuntimeStore(server.base_url, runtime_key="s3cret")
        assert store.create_session("warned", T0).id == "warned"
    with ServeProcess(tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table) as quiet:
        assert not any("process list" in line for line in quiet.output)


def test_a_run_lifecycle_over_http(keyed_server: ServeProcess):
    store = HttpRuntimeStore(keyed_server.base_url, runtime_key="s3cret")
    store.create_session("session", T0)
    command = root_start()
    assert store.start_root_run(command).started.inserted
    store.append_run_record(note(command.run, "thinking"))
    store.record_run_terminal(terminal(command.run))
    assert store.load_run("run").status == RunStatus.COMPLETED
    page = store.list_session_run_records("session", "", 10)
    assert [r.type for r in page.events] == ["run_started", "assistant_message", "run_completed"]
    with pytest.raises(RuntimeStoreError) as caught:
        store.load_run("missing")
    assert is_error(caught.value, RunNotFoundError)


def test_runtime_routes_refuse_requests_without_the_key(keyed_server: ServeProcess):
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        reply = httpx.post(f"{keyed_server.base_url}/api/v1/runtime/load_run", json={"run_id": "x"}, headers=headers)
        assert reply.status_code == 401
        assert reply.json()["error"]["code"] == "unauthorized"


def test_requests_are_signed_with_sigv4_when_given_aws_credentials():
    from botocore.credentials import Credentials

    seen: list[httpx.Request] = []

    def capture(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            200,
            json={
                "run_id": "r",
                "agent_id": "a",
                "status": "running",
                "start_outcome": "proceed",
                "started_at": "2026-01-01T00:00:00.000Z",
                "updated_at": "2026-01-01T00:00:00.000Z",
            },
        )

    store = HttpRuntimeStore(
        "https://api.example.com/prod",
        aws_credentials=Credentials("AKIDEXAMPLE", "secret"),
        region="eu-west-1",
        transport=httpx.MockTransport(capture),
    )
    assert store.load_run("r").run_id == "r"
    authorization = seen[0].headers["authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in authorization
    assert "x-amz-date" in seen[0].headers


def test_serve_given_no_key_makes_one_keeps_it_owner_only_and_requires_it(
    dynamodb_local, streamed_table, tmp_path: Path
):
    data_dir = tmp_path / "data"
    with ServeProcess(
        tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, data_dir=data_dir
    ) as server:
        key_file = data_dir / "runtime-key"
        assert any(str(key_file) in line for line in server.output), server.output
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = server.runtime_key
        assert len(key) >= 32
        for path, body in (
            ("/api/v1/runtime/load_session", {"session_id": "s"}),
            ("/api/v1/memory/a/runs/r/events", None),
        ):
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                refused = httpx.request("POST" if body else "GET", server.base_url + path, json=body, headers=headers)
                assert refused.status_code == 401, (path, headers)
        assert HttpRuntimeStore(server.base_url, runtime_key=key).create_session("keyed", T0).id == "keyed"
    with ServeProcess(
        tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, data_dir=data_dir
    ) as again:
        assert again.runtime_key == key, "a restart keeps the key workers were given"
        assert HttpRuntimeStore(again.base_url, runtime_key=key).load_session("keyed").id == "keyed"
