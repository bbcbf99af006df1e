"""`cairn serve`'s server secret: made once, kept owner-only in the data directory, the same after a restart."""

from __future__ import annotations

import secrets
import stat
from pathlib import Path

import boto3
import httpx

from tests.support import signatures
from tests.support.serve import ServeProcess

BODY = b'{"action": "opened"}'


def test_retries_and_verifiers_survive_a_restart_and_no_secret_is_stored_in_the_clear(
    dynamodb_local, streamed_table: str, tmp_path: Path
):
    data_dir = tmp_path / "data"
    key = secrets.token_urlsafe(32)
    provider_secret = "gh-" + secrets.token_hex(16)

    def provision(server: ServeProcess) -> httpx.Response:
        return httpx.post(
            f"{server.base_url}/api/v1/addresses", json={"task_id": "restart"}, headers={"Idempotency-Key": key}
        )

    def signed_post(url: str) -> httpx.Response:
        headers = {"Content-Type": "application/json", **signatures.github(provider_secret, BODY)}
        return httpx.post(url, content=BODY, headers=headers)

    with ServeProcess(
        tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, data_dir=data_dir
    ) as first:
        created = provision(first)
        assert created.status_code == 201, created.text
        answer = created.json()
        token, inbox_url = answer["credentials"]["read_token"], answer["endpoints"]["inbox_url"]
        registered = httpx.put(
            f"{answer['endpoints']['address_url']}/inbox/verifiers/github",
            json={"secret": provider_secret},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert registered.status_code == 201, registered.text
        assert signed_post(inbox_url).status_code == 202

    secret_file = data_dir / "server-secret"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    server_secret = secret_file.read_text().strip()
    table = boto3.client(
        "dynamodb",
        endpoint_url=dynamodb_local.endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    dump = str(table.scan(TableName=streamed_table)["Items"])
    for secret in (key, token, provider_secret, server_secret):
        assert secret not in dump

    with ServeProcess(
        tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, data_dir=data_dir
    ) as again:
        assert secret_file.read_text().strip() == server_secret
        retried = provision(again)
        assert retried.status_code == 201, retried.text
        # The same address and credentials; only the port in the URLs is the new server's.
        assert (retried.json()["address"], retried.json()["credentials"]) == (answer["address"], answer["credentials"])
        assert retried.json()["endpoints"]["inbox_url"] == inbox_url.replace(first.base_url, again.base_url)
        assert signed_post(inbox_url.replace(first.base_url, again.base_url)).status_code == 202
        refused = httpx.post(
            inbox_url.replace(first.base_url, again.base_url),
            content=BODY,
            headers={"Content-Type": "application/json", **signatures.github("wrong", BODY)},
        )
        assert refused.json()["error"]["code"] == "signature_invalid"
