"""CairnAddress's handler against `cairn serve` over HTTP, with Secrets Manager on moto.

What CloudFormation would see: create provisions one address and answers with
no credential, a retried create reuses it (also after a try that died between
provisioning and recording the answer), delete removes the address and the
secret, and the initial state is written once.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest

from cairn.entrypoints import address_resource
from tests.support.serve import ServeProcess

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server

STACK_ID = "arn:aws:cloudformation:us-east-1:123456789012:stack/team-agents/0f0e0d0c"


def request(kind: str, served: ServeProcess, request_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "RequestType": kind,
        "StackId": STACK_ID,
        "RequestId": request_id,
        "LogicalResourceId": "BuildCallbacks",
        "ResourceProperties": {
            "ServiceUrl": served.base_url,
            "TaskId": "nightly-build",
            "ExpiresInSeconds": "86400",
            "State": {"config": {"branch": "main"}},
        },
        **extra,
    }


@pytest.fixture
def secrets(served: ServeProcess, moto_env: None) -> Any:
    return boto3.client("secretsmanager", region_name="us-east-1")


def stored(secrets: Any, arn: str) -> dict[str, Any]:
    return json.loads(secrets.get_secret_value(SecretId=arn)["SecretString"])


def test_create_provisions_one_address_and_keeps_its_answer_in_the_secret(served: ServeProcess, secrets: Any) -> None:
    answer = address_resource.on_event(request("Create", served, str(uuid.uuid4())))

    arn = answer["PhysicalResourceId"]
    secret = stored(secrets, arn)
    assert answer["Data"] == {"AddressId": secret["address_id"], "Email": secret["email"], "SecretArn": arn}
    # No credential in what CloudFormation (and its logs) receive.
    assert secret["read_token"] not in json.dumps(answer)
    assert secret["inbox_url"] not in json.dumps(answer)
    with served.client() as client:
        headers = {"Authorization": f"Bearer {secret['read_token']}"}
        described = client.get(f"/api/v1/addresses/{secret['address_id']}", headers=headers)
        assert described.status_code == 200
        state = client.get(f"{secret['state_url']}/config", headers=headers)
        assert state.status_code == 200 and state.json()["value"] == {"branch": "main"}
        # The inbox URL in the secret works.
        assert client.post(secret["inbox_url"], json={"build": "done"}).status_code in (200, 201, 202)


def test_a_retried_create_reuses_the_address_it_recorded(served: ServeProcess, secrets: Any) -> None:
    request_id = str(uuid.uuid4())
    first = address_resource.on_event(request("Create", served, request_id))
    second = address_resource.on_event(request("Create", served, request_id))

    assert second == first
    assert len(secrets.list_secrets()["SecretList"]) == 1
    # The state written by the first try is still at revision 1: the retry wrote nothing.
    secret = stored(secrets, first["PhysicalResourceId"])
    with served.client() as client:
        state = client.get(f"{secret['state_url']}/config", headers={"Authorization": f"Bearer {secret['read_token']}"})
    assert state.json()["revision"] == 1


def test_a_create_that_died_after_provisioning_is_retried_onto_the_same_address(
    served: ServeProcess, secrets: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first try provisions, then dies (a timeout, say) before the answer reaches the secret."""
    request_id = str(uuid.uuid4())
    made: list[dict[str, Any]] = []
    real_provision = address_resource.provision

    def provision_then_die(*args: Any) -> dict[str, Any]:
        made.append(real_provision(*args))
        raise TimeoutError("the function timed out before recording the answer")

    monkeypatch.setattr(address_resource, "provision", provision_then_die)
    with pytest.raises(TimeoutError):
        address_resource.on_event(request("Create", served, request_id))
    monkeypatch.undo()

    answer = address_resource.on_event(request("Create", served, request_id))

    secret = stored(secrets, answer["PhysicalResourceId"])
    assert answer["Data"]["AddressId"] == made[0]["address_id"]
    assert secret["read_token"] == made[0]["read_token"] and secret["inbox_url"] == made[0]["inbox_url"]
    assert "provision_key" not in secret
    with served.client() as client:
        described = client.get(
            f"/api/v1/addresses/{secret['address_id']}", headers={"Authorization": f"Bearer {secret['read_token']}"}
        )
    assert described.status_code == 200


def test_a_new_request_makes_a_new_address(served: ServeProcess, secrets: Any) -> None:
    first = address_resource.on_event(request("Create", served, str(uuid.uuid4())))
    update = address_resource.on_event(request("Update", served, str(uuid.uuid4())))

    assert update["PhysicalResourceId"] != first["PhysicalResourceId"]
    assert update["Data"]["AddressId"] != first["Data"]["AddressId"]


def test_delete_removes_the_address_and_the_secret_and_may_run_twice(served: ServeProcess, secrets: Any) -> None:
    created = address_resource.on_event(request("Create", served, str(uuid.uuid4())))
    arn = created["PhysicalResourceId"]
    secret = stored(secrets, arn)

    deletion = request("Delete", served, str(uuid.uuid4()), PhysicalResourceId=arn)
    assert address_resource.on_event(deletion) == {"PhysicalResourceId": arn}
    assert address_resource.on_event(deletion) == {"PhysicalResourceId": arn}

    with served.client() as client:
        gone = client.get(
            f"/api/v1/addresses/{secret['address_id']}", headers={"Authorization": f"Bearer {secret['read_token']}"}
        )
    assert gone.status_code in (401, 404)
    assert secrets.list_secrets()["SecretList"] == []


def test_a_failed_provisioning_raises_without_a_credential(served: ServeProcess, secrets: Any) -> None:
    bad = request("Create", served, str(uuid.uuid4()))
    bad["ResourceProperties"]["ExpiresInSeconds"] = "1"  # below the service's minimum

    with pytest.raises(RuntimeError, match="provisioning failed with 4"):
        address_resource.on_event(bad)
