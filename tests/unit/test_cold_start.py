"""A new Lambda container of the API loads only what the requests it answers need.

Import time is what every new container pays before its first answer, so
an inbox post or a poll must not load what only the runtime store,
transcripts, MCP tools, email parsing or the OpenAPI document need. Checked
by what a fresh process has loaded, never by a timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# Loaded by the runtime, memory, transcript, MCP, email, wake-up, checkpoint, session, file and discovery paths only.
HEAVY = (
    "aws_lambda_powertools.event_handler.openapi.models",
    "pydantic_settings",
    "cairn.api.routes.mcp",
    "cairn.api.routes.discovery",
    "cairn.api.routes.email",
    "cairn.api.routes.outbound",
    "cairn.api.routes.subscriptions",
    "cairn.api.routes.viewer",
    "cairn.api.routes.checkpoints",
    "cairn.api.subscription_schemas",
    "cairn.api.checkpoint_schemas",
    "cairn.checkpoints.threads",
    "cairn.dynamodb.checkpoint_table",
    "cairn.api.routes.agent_sessions",
    "cairn.api.agent_session_schemas",
    "cairn.agent_sessions.conversations",
    "cairn.dynamodb.agent_session_table",
    "cairn.api.routes.strands",
    "cairn.api.strands_session_schemas",
    "cairn.agent_sessions.strands",
    "cairn.dynamodb.strands_session_table",
    "cairn.api.routes.files",
    "cairn.api.file_schemas",
    "cairn.files.files",
    "cairn.dynamodb.file_table",
    "cairn.wakeups.models",
    "cairn.api.runtime_schemas",
    "cairn.runtime.model",
    "cairn.runtime.methods",
    "cairn.runtime.engine",
    "cairn.dynamodb.runtime_store",
    "cairn.transcript.memory",
    "cairn.mcp.tools",
    "cairn.email.attachments",
    "cairn.email.mime",
    "cairn.email.ingest",
)

SCRIPT = """
import json, sys, types
from moto import mock_aws

with mock_aws():
    import cairn.entrypoints.api_handler as api
    loaded_at_import = sorted(sys.modules)
    from cairn.dynamodb.client import make_client
    from cairn.dynamodb.table import ensure_table
    from tests.support.lambda_client import LambdaClient, path_of

    ensure_table(make_client(api.services.settings), api.services.settings.table_name)
    events = LambdaClient.event  # builds API Gateway's proxy event; needs only a source address
    caller = types.SimpleNamespace(source_ip="203.0.113.7")
    context = types.SimpleNamespace(
        function_name="api", memory_limit_in_mb=512, aws_request_id="r",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:api",
    )

    def answer(*args, **kwargs):
        reply = api.lambda_handler(events(caller, *args, **kwargs), context)
        return reply["statusCode"], json.loads(reply["body"])

    statuses = []
    status, created = answer("POST", "/api/v1/addresses", json_body={})
    statuses.append(status)
    statuses.append(answer("POST", path_of(created["endpoints"]["inbox_url"]), json_body={"n": 1})[0])
    statuses.append(
        answer("GET", path_of(created["endpoints"]["events_url"]), token=created["credentials"]["read_token"])[0]
    )
    print(json.dumps({"import": loaded_at_import, "requests": sorted(sys.modules), "statuses": statuses}))
"""


def fresh_process(script: str) -> Any:
    """What `script` prints last, as JSON, run by a new interpreter as Lambda starts one."""
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)]),
        "CAIRN_TABLE_NAME": "cairn-cold",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True, text=True, check=True, cwd=ROOT, env=environment,
    )  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def test_provisioning_posting_and_polling_load_nothing_only_other_routes_need() -> None:
    seen = fresh_process(SCRIPT)
    assert seen["statuses"] == [201, 202, 200]
    assert not set(HEAVY) & set(seen["import"])
    assert not set(HEAVY) & set(seen["requests"])


def test_the_api_imports_botocore_alone_not_boto3_and_its_s3transfer() -> None:
    loaded = fresh_process("import json, sys, cairn.entrypoints.api_handler; print(json.dumps(sorted(sys.modules)))")
    assert "botocore.client" in loaded
    assert "boto3" not in loaded
    assert "s3transfer" not in loaded


def test_a_container_starts_with_collection_paused_and_leaves_it_running_with_init_frozen() -> None:
    script = """
        import gc, json
        collections = gc.get_stats()[2]["collections"]
        import cairn.entrypoints.api_handler
        print(json.dumps([gc.isenabled(), gc.get_freeze_count(), gc.get_stats()[2]["collections"] - collections]))
    """
    enabled, frozen, full_collections = fresh_process(script)
    assert enabled
    assert frozen > 50_000  # the modules and services init made, out of every later collection
    assert full_collections == 0


def test_snapstart_hooks_make_the_client_before_the_snapshot_and_a_new_one_after_restore(
    moto_env: None, monkeypatch
) -> None:
    from cairn.dynamodb.client import LazyClient
    from cairn.entrypoints import snapstart
    from cairn.settings import Settings

    registered: dict[str, tuple] = {}
    runtime_hooks = types.ModuleType("snapshot_restore_py")
    runtime_hooks.register_before_snapshot = lambda f, *a: registered.__setitem__("before", (f, a))  # type: ignore[attr-defined]
    runtime_hooks.register_after_restore = lambda f, *a: registered.__setitem__("after", (f, a))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", runtime_hooks)
    client = LazyClient(Settings(table_name="cairn-snap"))
    snapstart.install(client)

    before, arguments = registered["before"]
    before(*arguments)
    snapshotted = client.client()
    after, arguments = registered["after"]
    after(*arguments)
    restored = client.client()
    assert restored is not snapshotted
    assert client.list_tables()["TableNames"] == []  # the renewed client answers
