"""The handler behind `CairnAddress`: an address provisioned at deploy time through the service's own API.

CloudFormation (through CDK's provider framework) calls `on_event` on create,
update and delete. The creation answer (read token, inbox URL, email) goes
into a Secrets Manager secret this handler creates, never into the
resource's attributes or a log line: the attributes are the address id, its
email and the secret's ARN, and the secret's ARN is the physical id.

The secret is named from the request (stack, resource, request id) and is
created *before* the address, holding a random provisioning key: the address
is provisioned with that key as its `Idempotency-Key`, so a retry of the
request, even one after a crash between provisioning and recording the
answer, is answered with the same address and credentials. An update creates
a new address (a new physical id), and CloudFormation then deletes the old.
"""

from __future__ import annotations

import json
import secrets as random_secrets
from collections.abc import Mapping
from typing import Any

import boto3
import httpx

from cairn.tls import verified_context

# Secret names group the addresses a stack provisioned (the handler's IAM grant is this prefix).
SECRET_PREFIX = "cairn-addresses"
_TIMEOUT = httpx.Timeout(20.0)


def on_event(event: Mapping[str, Any], context: object = None) -> dict[str, Any]:
    """CloudFormation's request; the answer the provider framework reports back."""
    properties = event["ResourceProperties"]
    if event["RequestType"] == "Delete":
        delete(event["PhysicalResourceId"])
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    return create(secret_name(event), properties)


def secret_name(event: Mapping[str, Any]) -> str:
    """One name per request: a retry of the same request lands on the same secret."""
    stack_name = str(event["StackId"]).split("/")[1] if "/" in str(event["StackId"]) else str(event["StackId"])
    return f"{SECRET_PREFIX}/{stack_name}/{event['LogicalResourceId']}/{event['RequestId']}"


def create(name: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    """Provision the address once for this request, record it, write its initial state."""
    secrets = boto3.client("secretsmanager")
    # What the secret holds until the address exists: the key every try of this request provisions with.
    pending = {"status": "pending", "provision_key": random_secrets.token_urlsafe(32)}
    try:
        arn = secrets.create_secret(
            Name=name,
            SecretString=json.dumps(pending),
            Description="A Cairn address's creation answer (read token, inbox URL)",
        )["ARN"]
        stored: dict[str, Any] = pending
    except secrets.exceptions.ResourceExistsException:
        found = secrets.get_secret_value(SecretId=name)
        arn, stored = found["ARN"], json.loads(found["SecretString"])
    if "address_id" not in stored:
        # A secret an older version left pending holds no key: this try provisions with a new one.
        key = stored.get("provision_key") or pending["provision_key"]
        stored = provision(str(properties["ServiceUrl"]), properties, key)
        secrets.put_secret_value(SecretId=arn, SecretString=json.dumps(stored))
    write_initial_state(stored, properties.get("State") or {})
    return {
        "PhysicalResourceId": arn,
        "Data": {"AddressId": stored["address_id"], "Email": stored["email"], "SecretArn": arn},
    }


def provision(service_url: str, properties: Mapping[str, Any], key: str) -> dict[str, Any]:
    """POST /api/v1/addresses under `key`; the answer flattened, so each field is a key of the secret's JSON."""
    body = {"task_id": properties["TaskId"], "expires_in_seconds": int(properties["ExpiresInSeconds"])}
    response = _send("POST", f"{service_url.rstrip('/')}/api/v1/addresses", json=body, headers={"Idempotency-Key": key})
    if response.status_code != 201:
        # The error body is Cairn's `{"error": {"code", "message"}}`: no credential in it.
        raise RuntimeError(f"provisioning failed with {response.status_code}: {response.text[:500]}")
    answer = response.json()
    return {
        "address_id": answer["address"]["id"],
        "email": answer["address"]["email"],
        "expires_at": answer["address"]["expires_at"],
        "read_token": answer["credentials"]["read_token"],
        **{name: url for name, url in answer["endpoints"].items()},
    }


def write_initial_state(stored: Mapping[str, Any], state: Mapping[str, Any]) -> None:
    """Each key created with `if_revision: 0`; one that exists (a retry wrote it) is left as it is."""
    for key, value in state.items():
        response = _send(
            "PUT",
            f"{stored['state_url']}/{key}",
            json={"value": value, "if_revision": 0},
            headers={"Authorization": f"Bearer {stored['read_token']}"},
        )
        if response.status_code not in (200, 201, 409):
            raise RuntimeError(f"writing state key {key!r} failed with {response.status_code}: {response.text[:500]}")


def delete(physical_id: str) -> None:
    """Delete the address recorded in the secret, then the secret; what is already gone stays gone."""
    secrets = boto3.client("secretsmanager")
    try:
        stored = json.loads(secrets.get_secret_value(SecretId=physical_id)["SecretString"])
    except (secrets.exceptions.ResourceNotFoundException, secrets.exceptions.InvalidRequestException):
        return  # a create that failed before its secret existed, or a delete that already ran
    if "address_id" in stored:
        response = _send("DELETE", stored["address_url"], headers={"Authorization": f"Bearer {stored['read_token']}"})
        # 404: the address expired (or an earlier try deleted it); either way it is gone.
        if response.status_code not in (200, 204, 404):
            raise RuntimeError(f"deleting the address failed with {response.status_code}: {response.text[:500]}")
    secrets.delete_secret(SecretId=physical_id, ForceDeleteWithoutRecovery=True)


def _send(method: str, url: str, **parts: Any) -> httpx.Response:
    """One request to the service, with the process's TLS settings (`cairn.tls`) rather than new ones."""
    with httpx.Client(timeout=_TIMEOUT, verify=verified_context()) as client:
        return client.request(method, url, **parts)
