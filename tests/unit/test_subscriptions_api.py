"""Subscription routes through the Lambda resolver, on moto: shapes, rules, limits, secrets."""

from __future__ import annotations

import json
import threading
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cairn.wakeups.subscriptions import TESTS_PER_MINUTE
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient
from tests.support.webhooks import holding_receiver, receiver

QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/agent-jobs"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:agent-run"


@pytest.fixture
def local_api(moto_env: None, clock: FakeClock) -> LambdaClient:
    """Resolver on moto as `cairn serve` configures it: webhooks may reach 127.0.0.1 over http."""
    return LambdaClient.on_moto(clock, webhook_allow_local=True)


def base(created: dict[str, Any]) -> str:
    return f"/api/v1/addresses/{created['address']['id']}/subscriptions"


def subscribe(api: LambdaClient, created: dict[str, Any], target: dict[str, Any], **body: Any):
    token = created["credentials"]["read_token"]
    return api.request("POST", base(created), json_body={"target": target, **body}, token=token)


def read(api: LambdaClient, created: dict[str, Any], path: str = "", method: str = "GET"):
    return api.request(method, base(created) + path, token=created["credentials"]["read_token"])


def table_dump() -> str:
    return json.dumps(boto3.client("dynamodb", region_name="us-east-1").scan(TableName="cairn-test")["Items"])


def test_a_webhook_subscription_shows_its_secret_once(local_api: LambdaClient):
    created = local_api.provision()
    reply = subscribe(
        local_api, created, {"kind": "webhook", "url": "http://127.0.0.1:9/hook"}, types=["email.received"]
    )
    assert reply.status == 201, reply.text
    body = reply.json()
    secret = body["secret"]
    assert secret.startswith("whsec_")
    subscription = body["subscription"]
    assert subscription["target"] == {"kind": "webhook", "url": "http://127.0.0.1:9/hook"}
    assert subscription["types"] == ["email.received"]
    assert subscription["status"] == "active"
    assert subscription["attempts"] == []
    listing = read(local_api, created)
    one = read(local_api, created, f"/{subscription['id']}")
    assert listing.json()["subscriptions"] == [subscription]
    assert one.json()["subscription"] == subscription
    assert secret not in listing.text + one.text


def test_the_read_token_guards_every_route(local_api: LambdaClient):
    created = local_api.provision()
    other = local_api.provision()
    sub_id = subscribe(local_api, created, {"kind": "webhook", "url": "http://localhost/x"}).json()["subscription"][
        "id"
    ]
    for method, path in [("GET", ""), ("GET", f"/{sub_id}"), ("DELETE", f"/{sub_id}"), ("POST", f"/{sub_id}/rotate")]:
        reply = local_api.request(method, base(created) + path, token=other["credentials"]["read_token"])
        assert reply.status == 401, (method, path)
        assert reply.error_code == "unauthorized"
    assert len(read(local_api, created).json()["subscriptions"]) == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/hook",  # https only
        "https://10.0.0.8/hook",
        "https://192.168.1.1/hook",
        "https://169.254.169.254/latest/meta-data",  # instance metadata
        "https://[::1]/hook",
        "https://[fd00:ec2::254]/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "https://user:pw@example.com/hook",
        "https://localhost/hook",  # a name that resolves to loopback
        "not a url",
        # IPv6 forms that carry an IPv4 address which is not global.
        "https://[::7f00:1]/hook",  # IPv4-compatible ::127.0.0.1
        "https://[64:ff9b::a9fe:a9fe]/hook",  # NAT64 of 169.254.169.254
        "https://[64:ff9b:1::a9fe:a9fe]/hook",  # local-use NAT64
        "https://[2002:7f00:1::]/hook",  # 6to4 of 127.0.0.1
        "https://[2002:a00:8::]/hook",  # 6to4 of 10.0.0.8
        "https://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/hook",  # Teredo, client 10.0.0.1
        "https://[::ffff:0:a9fe:a9fe]/hook",  # IPv4-translated (SIIT) 169.254.169.254
        "https://[fec0::1]/hook",  # site-local, deprecated but still routed inside some networks
        # Characters no request line may carry (Python's URL parser drops some of them silently).
        "https://example.com/a b",
        "https://example.com/a\x00b",
        "https://example.com/a\x7f",
        "https://example.com/a\tb",
        "https://exa\r\nmple.com/hook",
        "https://example.com/hook\r\nX-Injected: 1",
        " https://example.com/hook",
        "https://caf\u00e9.example/hook",
        # Names DNS cannot hold: an empty label, a label over 63 characters, over 253 in all.
        "https://a..example.com/hook",
        "https://.example.com/hook",
        f"https://{'a' * 64}.com/hook",
        f"https://{'a.' * 127}com/hook",
    ],
)
def test_webhooks_never_reach_private_addresses(moto_api: LambdaClient, url: str):
    created = moto_api.provision()
    reply = subscribe(moto_api, created, {"kind": "webhook", "url": url})
    assert reply.status == 400, reply.text
    assert reply.error_code == "target_refused"
    assert read(moto_api, created).json()["subscriptions"] == []


def test_only_cairn_serve_may_use_plain_http_on_this_machine(moto_api: LambdaClient, local_api: LambdaClient):
    assert subscribe(moto_api, moto_api.provision(), {"kind": "webhook", "url": "http://127.0.0.1:8/x"}).status == 400
    assert subscribe(local_api, local_api.provision(), {"kind": "webhook", "url": "http://127.0.0.1:8/x"}).status == 201
    refused = subscribe(local_api, local_api.provision(), {"kind": "webhook", "url": "http://10.1.1.1/x"})
    assert refused.error_code == "target_refused"


@pytest.mark.parametrize(
    "body",
    [
        {"target": {"kind": "pigeon", "url": "https://example.com"}},
        {"target": {"kind": "webhook"}},
        {"target": {"kind": "webhook", "url": "https://example.com", "extra": 1}},
        {"target": {"kind": "webhook", "url": "https://example.com"}, "types": [""]},
        {"target": {"kind": "webhook", "url": "https://example.com"}, "description": "x" * 501},
        {},
    ],
)
def test_malformed_requests_change_nothing(moto_api: LambdaClient, body: dict):
    created = moto_api.provision()
    reply = moto_api.request("POST", base(created), json_body=body, token=created["credentials"]["read_token"])
    assert reply.status in (400, 422), reply.text
    assert reply.error_code == "invalid_request"
    assert read(moto_api, created).json()["subscriptions"] == []


def test_an_address_has_at_most_the_configured_number(moto_env: None, clock: FakeClock):
    api = LambdaClient.on_moto(clock, max_subscriptions_per_address=3)
    created = api.provision()
    target = {"kind": "webhook", "url": "https://example.com/hook"}
    ids = [subscribe(api, created, target).json()["subscription"]["id"] for _ in range(3)]
    refused = subscribe(api, created, target)
    assert refused.status == 409
    assert refused.error_code == "subscription_limit_exceeded"
    assert read(api, created, f"/{ids[0]}", "DELETE").json() == {"subscription_id": ids[0], "deleted": True}
    assert subscribe(api, created, target).status == 201
    assert len(read(api, created).json()["subscriptions"]) == 3


def test_unknown_subscriptions_are_not_found(moto_api: LambdaClient):
    created = moto_api.provision()
    sub_id = subscribe(moto_api, created, {"kind": "webhook", "url": "https://example.com/h"}).json()["subscription"][
        "id"
    ]
    assert read(moto_api, created, f"/{sub_id}", "DELETE").status == 200
    for path, method in [
        (f"/{sub_id}", "GET"),
        (f"/{sub_id}", "DELETE"),
        ("/sub_" + "0" * 24, "GET"),
        ("/" + "x" * 600, "GET"),
    ]:
        reply = read(moto_api, created, path, method)
        assert reply.status == 404, (path, reply.text)
        assert reply.error_code == "subscription_not_found"


def test_deleting_the_address_deletes_its_subscriptions(moto_api: LambdaClient):
    created = moto_api.provision()
    sub_id = subscribe(moto_api, created, {"kind": "webhook", "url": "https://example.com/h"}).json()["subscription"][
        "id"
    ]
    assert sub_id in table_dump()
    token = created["credentials"]["read_token"]
    assert moto_api.request("DELETE", f"/api/v1/addresses/{created['address']['id']}", token=token).status == 200
    assert sub_id not in table_dump()


def test_aws_targets_must_match_the_allow_list(moto_env: None, clock: FakeClock):
    api = LambdaClient.on_moto(
        clock, wake_target_arns=("arn:aws:sqs:us-east-1:123456789012:agent-*", "arn:aws:states:*:123456789012:*")
    )
    created = api.provision()
    assert subscribe(api, created, {"kind": "sqs", "queue_url": QUEUE_URL}).status == 201
    clock.advance(1)
    assert subscribe(api, created, {"kind": "step_functions", "task_token": "AAAA-token"}).status == 201
    for target in [
        {"kind": "sqs", "queue_url": QUEUE_URL.replace("agent-jobs", "payroll")},
        {"kind": "sqs", "queue_url": "https://evil.example.com/123456789012/agent-jobs"},
        {"kind": "lambda", "function_arn": FUNCTION_ARN},
        {"kind": "eventbridge", "event_bus_arn": "arn:aws:events:us-east-1:123456789012:event-bus/default"},
    ]:
        reply = subscribe(api, created, target)
        assert reply.status == 400, target
        assert reply.error_code == "target_refused"
    kinds = [item["target"] for item in read(api, created).json()["subscriptions"]]
    # A task token completes a task: it is accepted once and never shown again.
    assert kinds == [{"kind": "sqs", "queue_url": QUEUE_URL}, {"kind": "step_functions"}]


def test_without_an_allow_list_no_aws_target_is_accepted(moto_api: LambdaClient):
    created = moto_api.provision()
    for target in [{"kind": "lambda", "function_arn": FUNCTION_ARN}, {"kind": "step_functions", "task_token": "t"}]:
        assert subscribe(moto_api, created, target).error_code == "target_refused"


def test_a_test_delivery_is_signed_and_recorded(local_api: LambdaClient):
    created = local_api.provision()
    with receiver() as hook:
        reply = subscribe(local_api, created, {"kind": "webhook", "url": hook.url})
        secret, sub_id = reply.json()["secret"], reply.json()["subscription"]["id"]
        tested = read(local_api, created, f"/{sub_id}/test", "POST")
        assert tested.status == 200, tested.text
        assert tested.json()["attempt"]["outcome"] == "delivered"
        assert tested.json()["attempt"]["status_code"] == 200
        (request,) = hook.wait_for(1)
    payload = Webhook(secret).verify(request.body, request.headers)
    assert payload["type"] == "subscription.test"
    assert payload["subscription_id"] == sub_id
    assert payload["address_id"] == created["address"]["id"]
    assert request.headers["webhook-id"] == payload["event"]["id"]
    shown = read(local_api, created, f"/{sub_id}").json()["subscription"]
    assert shown["attempts"] == [tested.json()["attempt"]]
    assert shown["delivered_through"] == 0


def test_a_failed_test_delivery_says_why(local_api: LambdaClient):
    created = local_api.provision()
    with receiver(default=503) as hook:
        sub_id = subscribe(local_api, created, {"kind": "webhook", "url": hook.url}).json()["subscription"]["id"]
        attempt = read(local_api, created, f"/{sub_id}/test", "POST").json()["attempt"]
    assert (attempt["outcome"], attempt["status_code"]) == ("failed", 503)


def test_test_deliveries_are_limited_per_address_a_minute(local_api: LambdaClient, clock: FakeClock):
    created = local_api.provision()
    with receiver() as hook:
        first, second = (
            subscribe(local_api, created, {"kind": "webhook", "url": hook.url}).json()["subscription"]["id"]
            for _ in range(2)
        )
        for n in range(TESTS_PER_MINUTE):
            assert read(local_api, created, f"/{(first, second)[n % 2]}/test", "POST").status == 200
        refused = read(local_api, created, f"/{second}/test", "POST")
        assert (refused.status, refused.error_code) == (429, "rate_limited")
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        hook.wait_for(TESTS_PER_MINUTE)
        other = local_api.provision()
        other_sub = subscribe(local_api, other, {"kind": "webhook", "url": hook.url}).json()["subscription"]["id"]
        assert read(local_api, other, f"/{other_sub}/test", "POST").status == 200, "another address's own count"
        clock.advance(60)
        assert read(local_api, created, f"/{first}/test", "POST").status == 200, "the next minute"
        hook.wait_for(TESTS_PER_MINUTE + 2)
    assert len(read(local_api, created, f"/{second}").json()["subscription"]["attempts"]) == TESTS_PER_MINUTE // 2


def test_rotation_signs_with_both_secrets_for_a_day(local_api: LambdaClient, clock: FakeClock):
    created = local_api.provision()
    with receiver() as hook:
        first = subscribe(local_api, created, {"kind": "webhook", "url": hook.url}).json()
        sub_id, old = first["subscription"]["id"], first["secret"]
        rotated = read(local_api, created, f"/{sub_id}/rotate", "POST")
        assert rotated.status == 200, rotated.text
        new = rotated.json()["secret"]
        assert new.startswith("whsec_") and new != old
        read(local_api, created, f"/{sub_id}/test", "POST")
        clock.advance(86_401)
        read(local_api, created, f"/{sub_id}/test", "POST")
        during, after = hook.wait_for(2)
    # Verification checks the timestamp against the real clock, so the late one is checked as signed.
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        Webhook(secret).verify(during.body, during.headers)
    assert len(after.headers["webhook-signature"].split(" ")) == 1


def test_rotation_is_for_webhooks_only(moto_env: None, clock: FakeClock):
    api = LambdaClient.on_moto(clock, wake_target_arns=("arn:aws:sqs:*",))
    created = api.provision()
    sub_id = subscribe(api, created, {"kind": "sqs", "queue_url": QUEUE_URL}).json()["subscription"]["id"]
    reply = read(api, created, f"/{sub_id}/rotate", "POST")
    assert reply.status == 400
    assert reply.error_code == "target_refused"


def test_a_wrong_secret_is_rejected(local_api: LambdaClient):
    created = local_api.provision()
    with receiver() as hook:
        sub_id = subscribe(local_api, created, {"kind": "webhook", "url": hook.url}).json()["subscription"]["id"]
        read(local_api, created, f"/{sub_id}/test", "POST")
        (request,) = hook.wait_for(1)
    other = local_api.request(
        "POST",
        base(created),
        json_body={"target": {"kind": "webhook", "url": hook.url}},
        token=created["credentials"]["read_token"],
    ).json()["secret"]
    with pytest.raises(WebhookVerificationError):
        Webhook(other).verify(request.body, request.headers)


@pytest.mark.parametrize("url", ["https://[64:ff9b::808:808]/hook", "https://[2002:808:808::]/hook"])
def test_ipv6_forms_of_a_global_ipv4_address_are_accepted(moto_api: LambdaClient, url: str):
    assert subscribe(moto_api, moto_api.provision(), {"kind": "webhook", "url": url}).status == 201


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/a b", "http://127.0.0.1:9/a\x00", "http://localhost:9/\x7f", "http://127.0.0.1:9/a\r\nb"],
)
def test_a_url_no_request_can_carry_is_refused_under_cairn_serve_too(local_api: LambdaClient, url: str):
    created = local_api.provision()
    reply = subscribe(local_api, created, {"kind": "webhook", "url": url})
    assert reply.status == 400, reply.text
    assert reply.error_code == "target_refused"
    assert read(local_api, created).json()["subscriptions"] == []


API_ID = "a1b2c3d4e5"
EXECUTE_API = f"{API_ID}.execute-api.us-east-1.amazonaws.com"


def subscribe_through_gateway(api: LambdaClient, created: dict[str, Any], url: str, domain: str = EXECUTE_API):
    """A subscription request as API Gateway hands it over: its own domain and API id in the context."""
    event = api.event(
        "POST",
        base(created),
        json_body={"target": {"kind": "webhook", "url": url}},
        token=created["credentials"]["read_token"],
        headers={"Host": domain},
    )
    event["requestContext"].update({"domainName": domain, "apiId": API_ID, "stage": "prod"})
    answer = api.app.resolve(event, {})
    return answer["statusCode"], json.loads(answer["body"])


@pytest.mark.parametrize(
    "url",
    [
        f"https://{EXECUTE_API}/prod/api/v1/inbox/{{address}}/secret",
        f"https://{EXECUTE_API.upper()}/prod/anything",
        f"https://{EXECUTE_API}.:443/prod/x",
        f"https://{API_ID}.execute-api.us-east-1.api.aws/prod/x",
    ],
)
def test_a_webhook_cannot_target_the_api_gateway_it_was_created_through(moto_api: LambdaClient, url: str):
    created = moto_api.provision()
    status, body = subscribe_through_gateway(moto_api, created, url.format(address=created["address"]["id"]))
    assert status == 400, body
    assert body["error"]["code"] == "target_refused"
    assert body["error"]["field"] == "target.url"
    assert "Cairn" in body["error"]["message"]
    assert read(moto_api, created).json()["subscriptions"] == []


def test_a_webhook_cannot_target_the_deployments_custom_domain(moto_env: None, clock: FakeClock):
    api = LambdaClient.on_moto(clock, public_base_url="https://cairn.example.com")
    created = api.provision()
    inbox_url = created["endpoints"]["inbox_url"]
    assert inbox_url.startswith("https://cairn.example.com/")
    for url in (inbox_url, "https://Cairn.Example.com./api/v1/addresses", f"https://{EXECUTE_API}/prod/x"):
        status, body = subscribe_through_gateway(api, created, url, domain="cairn.example.com")
        assert (status, body["error"]["code"]) == (400, "target_refused"), url
    assert read(api, created).json()["subscriptions"] == []


def test_a_cairn_wake_up_posted_to_an_inbox_is_refused_and_stores_nothing(moto_api: LambdaClient):
    created = moto_api.provision()
    reply = moto_api.request(
        "POST",
        urlsplit(created["endpoints"]["inbox_url"]).path,
        json_body={"type": "loop"},
        headers={"Cairn-Wakeup": "sub_" + "0" * 24},
    )
    # 410 ends the subscription that sent it: an inbox is never a wake-up target.
    assert reply.status == 410, reply.text
    assert reply.error_code == "wakeup_refused"
    assert moto_api.poll(created).json()["events"] == []


def test_a_test_delivery_to_a_receiver_that_never_finishes_answers_at_the_deadline(moto_env: None, clock: FakeClock):
    api = LambdaClient.on_moto(clock, webhook_allow_local=True, webhook_timeout_seconds=1)
    created = api.provision()
    with holding_receiver(interval=0.1) as slow:
        sub_id = subscribe(api, created, {"kind": "webhook", "url": slow.url}).json()["subscription"]["id"]
        done = threading.Event()
        answers: list[Any] = []
        worker = threading.Thread(
            target=lambda: (answers.append(read(api, created, f"/{sub_id}/test", "POST")), done.set()), daemon=True
        )
        worker.start()
        assert done.wait(60), "POST .../test is still held by the receiver"
        # Answered while the receiver still held its answer open.
        assert not slow.released.is_set()
    (tested,) = answers
    assert tested.status == 200, tested.text
    attempt = tested.json()["attempt"]
    assert attempt["outcome"] == "failed"
    assert "deadline" in attempt["error"]


def test_rotation_keeps_the_current_secret_and_the_previous_one_only(local_api: LambdaClient):
    created = local_api.provision()
    with receiver() as hook:
        first = subscribe(local_api, created, {"kind": "webhook", "url": hook.url}).json()
        sub_id = first["subscription"]["id"]
        issued = [first["secret"]] + [
            read(local_api, created, f"/{sub_id}/rotate", "POST").json()["secret"] for _ in range(5)
        ]
        read(local_api, created, f"/{sub_id}/test", "POST")
        (request,) = hook.wait_for(1)
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    for secret in issued[-2:]:
        Webhook(secret).verify(request.body, request.headers)
    for secret in issued[:-2]:
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(request.body, request.headers)
        assert secret not in table_dump()


def test_a_subscription_stored_with_many_secrets_signs_with_two_and_keeps_two_after_rotating(local_api: LambdaClient):
    from cairn.dynamodb.subscription_table import SubscriptionTable
    from cairn.wakeups.models import SigningSecret
    from cairn.wakeups.subscriptions import new_secret

    created = local_api.provision()
    address_id = created["address"]["id"]
    with receiver() as hook:
        first = subscribe(local_api, created, {"kind": "webhook", "url": hook.url}).json()
        sub_id = first["subscription"]["id"]
        # As unbounded rotation left them: the newest first, all still within their overlap.
        piled = [new_secret() for _ in range(30)]
        until = local_api.services.clock() + 3_600
        store = SubscriptionTable(boto3.client("dynamodb", region_name="us-east-1"), "cairn-test")
        store.rotate(address_id, sub_id, [SigningSecret(piled[0])] + [SigningSecret(s, until) for s in piled[1:]])
        read(local_api, created, f"/{sub_id}/test", "POST")
        (before,) = hook.wait_for(1)
        assert len(before.headers["webhook-signature"].split(" ")) == 2
        Webhook(piled[0]).verify(before.body, before.headers)
        fresh = read(local_api, created, f"/{sub_id}/rotate", "POST").json()["secret"]
        read(local_api, created, f"/{sub_id}/test", "POST")
        _, after = hook.wait_for(2)
    for secret in (fresh, piled[0]):
        Webhook(secret).verify(after.body, after.headers)
    assert [secret for secret in piled[1:] if secret in table_dump()] == []
