"""Kept headers and provider signature verifiers of an inbox, through the resolver in memory; the
sealed secrets as DynamoDB stores them, on moto."""

from __future__ import annotations

import json

import boto3
import pytest

from tests.support import signatures
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, Reply, path_of

BODY = b'{"action": "opened", "number": 7}'
SECRETS = {
    "github": "gh-secret",
    "stripe": "whsec_stripe_test",
    "slack": "slack-signing",
    "standard_webhooks": signatures.STANDARD_WEBHOOKS_SECRET,
}


def sign(kind: str, secret: str, body: bytes, at: int) -> dict[str, str]:
    if kind == "github":
        return signatures.github(secret, body)
    return getattr(signatures, kind)(secret, body, at)


class Owner:
    def __init__(self, api: LambdaClient, **provision: object) -> None:
        self.api = api
        self.created = api.provision(**provision)
        self.token = self.created["credentials"]["read_token"]
        self.url = path_of(self.created["endpoints"]["address_url"])
        self.inbox = path_of(self.created["endpoints"]["inbox_url"])

    def call(self, method: str, path: str = "", body: object = None) -> Reply:
        return self.api.request(method, self.url + path, json_body=body, token=self.token)

    def post(self, body: bytes, headers: dict[str, str], content_type: str = "application/json") -> Reply:
        return self.api.request("POST", self.inbox, body=body, headers={"Content-Type": content_type, **headers})

    def events(self) -> list[dict]:
        return self.api.poll(self.created).json()["events"]


def test_kept_headers_are_chosen_at_provisioning_and_changed_with_patch(memory_api: LambdaClient):
    owner = Owner(memory_api, inbox={"keep_headers": ["X-GitHub-Event", "x-github-event", "Stripe-Signature"]})
    sent = {"X-GitHub-Event": "push", "Stripe-Signature": "t=1,v1=x", "Authorization": "Bearer sender", "X-Other": "1"}
    assert owner.post(b"{}", sent).status == 202
    changed = owner.call("PATCH", body={"inbox": {"keep_headers": ["X-Other", "Missing-Header"]}})
    assert changed.status == 200, changed.text
    assert changed.json() == {"inbox": {"keep_headers": ["x-other", "missing-header"], "verifiers": []}}
    assert owner.post(b"{}", sent).status == 202
    first, second = owner.events()
    assert first["headers"] == {"x-github-event": "push", "stripe-signature": "t=1,v1=x"}
    assert second["headers"] == {"x-other": "1"}
    assert owner.call("GET", "/inbox").json()["inbox"]["keep_headers"] == ["x-other", "missing-header"]


@pytest.mark.parametrize(
    "names",
    [["Authorization"], ["cookie"], ["Proxy-Authorization"], [f"X-H{n}" for n in range(17)], ["bad header"], [""]],
    ids=["authorization", "cookie", "proxy-authorization", "seventeen", "space", "empty"],
)
def test_credentials_and_too_many_headers_are_never_kept(memory_api: LambdaClient, names: list[str]):
    owner = Owner(memory_api)
    refused = owner.call("PATCH", body={"inbox": {"keep_headers": names}})
    assert refused.status in (400, 422) and refused.error_code == "invalid_request", refused.text
    assert owner.call("GET", "/inbox").json()["inbox"]["keep_headers"] == []
    provisioned = memory_api.request("POST", "/api/v1/addresses", json_body={"inbox": {"keep_headers": names}})
    assert provisioned.status in (400, 422)


def test_inbox_settings_need_the_read_token(memory_api: LambdaClient):
    owner = Owner(memory_api)
    for method, path, body in [
        ("PATCH", "", {"inbox": {"keep_headers": []}}),
        ("GET", "/inbox", None),
        ("PUT", "/inbox/verifiers/github", {"secret": "s"}),
        ("DELETE", "/inbox/verifiers/github", None),
    ]:
        reply = memory_api.request(method, owner.url + path, json_body=body, token="crt_wrong")
        assert (reply.status, reply.error_code) == (401, "unauthorized")


@pytest.mark.parametrize("kind", list(SECRETS))
def test_each_verifier_accepts_a_valid_signature_and_refuses_the_rest(
    memory_api: LambdaClient, clock: FakeClock, kind: str
):
    owner = Owner(memory_api)
    secret = SECRETS[kind]
    field = "signing_secret" if kind == "slack" else "secret"
    registered = owner.call("PUT", f"/inbox/verifiers/{kind}", {field: secret})
    assert registered.status == 201, registered.text
    assert secret not in registered.text and secret not in owner.call("GET", "/inbox").text
    now = int(clock())
    wrong_secret = sign(
        kind,
        "not-" + secret if kind != "standard_webhooks" else signatures.STANDARD_WEBHOOKS_SECRET[:-8] + "AAAAAAA=",
        BODY,
        now,
    )
    changed_body = sign(kind, secret, BODY + b" ", now)
    refusals = [owner.post(BODY, wrong_secret), owner.post(BODY, changed_body), owner.post(BODY, {})]
    if kind != "github":
        refusals.append(owner.post(BODY, sign(kind, secret, BODY, now - 301)))
    for refused in refusals:
        assert (refused.status, refused.error_code) == (401, "signature_invalid"), refused.text
    assert owner.events() == []
    accepted = owner.post(BODY, sign(kind, secret, BODY, now))
    assert accepted.status == 202, accepted.text
    (event,) = owner.events()
    assert (event["verified_by"], event["ingress_surface"], event["data"]) == (kind, "http", json.loads(BODY))


def test_a_stranger_learns_nothing_of_the_verifiers(memory_api: LambdaClient):
    owner = Owner(memory_api)
    owner.call("PUT", "/inbox/verifiers/github", {"secret": "gh"})
    wrong = owner.inbox.rsplit("/", 1)[0] + "/not-the-secret"
    for _ in range(2):  # before and after this process has seen the settings
        reply = memory_api.request("POST", wrong, body=BODY, headers={"Content-Type": "application/json"})
        assert (reply.status, reply.error_code) == (401, "unauthorized")
        owner.post(BODY, signatures.github("gh", BODY))


def test_a_verifier_registered_after_a_post_binds_the_next_post(memory_api: LambdaClient):
    """The process saw the inbox with no verifier; the append itself finds out."""
    owner = Owner(memory_api)
    assert owner.post(BODY, {}).status == 202
    assert owner.call("PUT", "/inbox/verifiers/github", {"secret": "gh"}).status == 201
    assert owner.post(BODY, {}).error_code == "signature_invalid"
    assert owner.call("DELETE", "/inbox/verifiers/github").json()["inbox"]["verifiers"] == []
    assert owner.post(BODY, {}).status == 202
    assert [event["verified_by"] for event in owner.events()] == [None, None]


def test_any_registered_verifier_may_pass_and_names_itself(memory_api: LambdaClient, clock: FakeClock):
    owner = Owner(memory_api)
    owner.call("PUT", "/inbox/verifiers/github", {"secret": "gh"})
    replaced = owner.call("PUT", "/inbox/verifiers/stripe", {"secret": "st", "tolerance_s": 60})
    assert replaced.status == 201
    assert owner.call("PUT", "/inbox/verifiers/stripe", {"secret": "st2", "tolerance_s": 60}).status == 200
    kinds = [(item["kind"], item["tolerance_s"]) for item in owner.call("GET", "/inbox").json()["inbox"]["verifiers"]]
    assert kinds == [("github", None), ("stripe", 60)]
    refused = owner.post(BODY, signatures.stripe("st2", BODY, int(clock()) - 61))
    assert set(refused.json()["error"]["reasons"]) == {"github", "stripe"}
    assert owner.post(BODY, signatures.stripe("st2", BODY, int(clock()))).status == 202
    assert owner.post(BODY, signatures.github("gh", BODY)).status == 202
    assert [event["verified_by"] for event in owner.events()] == ["stripe", "github"]


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("gitlab", {"secret": "s"}),
        ("github", {"secret": ""}),
        ("github", {"secret": "s", "tolerance_s": 30}),
        ("standard_webhooks", {"secret": "s", "tolerance_s": 30}),
        ("stripe", {"secret": "s", "tolerance_s": 0}),
        ("stripe", {"secret": "s", "tolerance_s": 3601}),
        ("stripe", {"secret": "s", "tolerance_s": True}),  # taken as 1 s before tolerance_s was strict
        ("slack", {"secret": "s", "tolerance_s": "300"}),
        ("stripe", {"kind": "slack", "secret": "s"}),
        ("standard_webhooks", {"secret": "whsec_"}),
        ("github", {"secret": "s", "extra": 1}),
    ],
)
def test_unusable_verifiers_are_refused(memory_api: LambdaClient, kind: str, body: dict):
    owner = Owner(memory_api)
    refused = owner.call("PUT", f"/inbox/verifiers/{kind}", body)
    assert refused.status in (400, 422) and refused.error_code == "invalid_request", refused.text
    assert owner.call("GET", "/inbox").json()["inbox"]["verifiers"] == []


@pytest.mark.parametrize(
    ("kind", "said"),
    [("stripe", "for stripe and slack only."), ("github", "for stripe and slack only (github signs no time).")],
)
def test_a_refused_tolerance_says_why_for_the_kind_asked(memory_api: LambdaClient, kind: str, said: str):
    refused = Owner(memory_api).call("PUT", f"/inbox/verifiers/{kind}", {"secret": "s", "tolerance_s": 100_000})
    assert refused.json()["error"]["message"].endswith(said)


def head_item(owner: Owner) -> dict:
    client = boto3.client("dynamodb", region_name="us-east-1")
    key = {"pk": {"S": f"A#{owner.created['address']['id']}"}, "sk": {"S": "META"}}
    return client.get_item(TableName="cairn-test", Key=key, ConsistentRead=True)["Item"]


def table_dump() -> str:
    return json.dumps(boto3.client("dynamodb", region_name="us-east-1").scan(TableName="cairn-test")["Items"])


def test_verifier_secrets_are_stored_sealed_and_still_check_signatures(moto_api: LambdaClient, clock: FakeClock):
    owner = Owner(moto_api)
    secrets = {"github": "gh-provider-secret-7f3a", "stripe": "whsec_stripe_provider_secret_51c2"}
    for kind, secret in secrets.items():
        assert owner.call("PUT", f"/inbox/verifiers/{kind}", {"secret": secret}).status == 201

    dump = table_dump()
    for secret in secrets.values():
        assert secret not in dump
    assert owner.post(BODY, signatures.github(secrets["github"], BODY)).status == 202
    assert owner.post(BODY, signatures.stripe(secrets["stripe"], BODY, int(clock()))).status == 202
    assert owner.post(BODY, signatures.github("another-secret", BODY)).error_code == "signature_invalid"
    assert [event["verified_by"] for event in owner.events()] == ["github", "stripe"]


def test_a_secret_stored_as_given_before_sealing_keeps_working_and_is_sealed_at_the_next_change(
    moto_api: LambdaClient,
):
    owner = Owner(moto_api)
    plain = "gh-registered-before-sealing-9d1e"
    # The head as an earlier version wrote it: the verifier's secret as given.
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName="cairn-test",
        Key={"pk": {"S": f"A#{owner.created['address']['id']}"}, "sk": {"S": "META"}},
        UpdateExpression="SET inbox_rev = :rev, inbox_keep_headers = :none, inbox_verifiers = :verifiers",
        ExpressionAttributeValues={
            ":rev": {"N": "1"},
            ":none": {"L": []},
            ":verifiers": {"M": {"github": {"M": {"secret": {"S": plain}, "created_at": {"N": "1"}}}}},
        },
    )
    assert owner.post(BODY, signatures.github(plain, BODY)).status == 202
    assert owner.post(BODY, signatures.github("another-secret", BODY)).error_code == "signature_invalid"

    changed = owner.call("PATCH", body={"inbox": {"keep_headers": ["x-github-event"]}})

    assert changed.status == 200, changed.text
    assert plain not in table_dump()
    assert "sealed_secret" in head_item(owner)["inbox_verifiers"]["M"]["github"]["M"]
    assert owner.post(BODY, signatures.github(plain, BODY)).status == 202
    assert [event["verified_by"] for event in owner.events()] == ["github", "github"]


def test_a_verifier_sealed_under_another_server_secret_refuses_posts_and_says_so(
    moto_env: None, moto_api: LambdaClient, clock: FakeClock
):
    """The deployment's server secret was replaced: the secret no longer opens, and no post gets a 500."""
    owner = Owner(moto_api)
    assert owner.call("PUT", "/inbox/verifiers/github", {"secret": "gh-before"}).status == 201
    assert owner.call("PUT", "/inbox/verifiers/stripe", {"secret": "whsec_before"}).status == 201
    owner.api = LambdaClient.on_moto(clock, server_secret="another-server-secret-" + "x" * 40)
    refused = owner.post(BODY, signatures.github("gh-before", BODY))
    assert (refused.status, refused.error_code) == (401, "signature_invalid"), refused.text
    assert set(refused.json()["error"]["reasons"]) == {"github", "stripe"}
    assert "register it again" in refused.json()["error"]["reasons"]["github"]
    assert owner.call("PUT", "/inbox/verifiers/github", {"secret": "gh-after"}).status == 200
    assert owner.post(BODY, signatures.github("gh-after", BODY)).status == 202
    assert [event["verified_by"] for event in owner.events()] == ["github"]


def test_a_change_that_changes_nothing_writes_nothing(moto_api: LambdaClient):
    """Each new revision sends inbox posts in flight to read the settings again."""
    owner = Owner(moto_api, inbox={"keep_headers": ["x-github-event"]})
    revision = head_item(owner).get("inbox_rev")
    for _ in range(3):
        assert owner.call("DELETE", "/inbox/verifiers/slack").status == 200
        assert owner.call("PATCH", body={"inbox": {"keep_headers": ["x-github-event"]}}).status == 200
    assert head_item(owner).get("inbox_rev") == revision
    assert owner.call("PATCH", body={"inbox": {"keep_headers": []}}).status == 200
    assert head_item(owner).get("inbox_rev") != revision
