"""The address API through the Lambda resolver, in memory; what DynamoDB stores, on moto."""

from __future__ import annotations

import json
from datetime import datetime

import boto3
import pytest

from cairn import errors, jsontext
from cairn.settings import InvalidSetting
from tests.support.lambda_client import LAMBDA_ANSWER_LIMIT, LambdaClient, path_of, settings_for_tests

INBOX_LIMIT = 1_000_000


def events_of(reply) -> list[dict]:
    assert reply.status == 200, reply.text
    return reply.json()["events"]


# -- provisioning -------------------------------------------------------------


def test_provision_returns_the_agentaddress_shape(memory_api: LambdaClient):
    created = memory_api.provision(task_id="build-42", name="nightly build", expires_in_seconds=3600)
    address = created["address"]
    assert address["task_id"] == "build-42"
    assert address["name"] == "nightly build"
    assert address["email"] == f"{address['id']}@cairn.localhost"
    assert address["expires_at"] == address["expiresAt"] is not None
    assert created["credentials"]["read_token"]
    endpoints = created["endpoints"]
    assert endpoints["events_url"] == f"http://cairn.test/api/v1/addresses/{address['id']}/events"
    assert endpoints["inbox_url"].startswith(f"http://cairn.test/api/v1/inbox/{address['id']}/")
    assert endpoints["state_url"].endswith("/state")


def test_provision_accepts_an_empty_request(memory_api: LambdaClient):
    reply = memory_api.request("POST", "/api/v1/addresses")
    assert reply.status == 201
    assert reply.json()["address"]["expiresAt"] is None


@pytest.mark.parametrize("expires_in", [59, 31_536_001, -1])
def test_provision_refuses_lifetimes_out_of_range(memory_api: LambdaClient, expires_in: int):
    reply = memory_api.request("POST", "/api/v1/addresses", json_body={"expires_in_seconds": expires_in})
    assert reply.status in (400, 422)
    assert reply.error_code == "invalid_request"
    assert "expires_in_seconds" in reply.text


def test_secrets_are_stored_only_as_digests(moto_api: LambdaClient):
    created = moto_api.provision()
    secret = created["endpoints"]["inbox_url"].rsplit("/", 1)[1]
    items = boto3.client("dynamodb", region_name="us-east-1").scan(TableName="cairn-test")["Items"]
    dump = json.dumps(items)
    assert created["credentials"]["read_token"] not in dump
    assert secret not in dump


def test_configured_public_base_url_wins(clock):
    api = LambdaClient.in_memory(clock, public_base_url="https://cairn.example.com/prod/")
    created = api.provision()
    assert created["endpoints"]["events_url"].startswith("https://cairn.example.com/prod/api/v1/addresses/")


def test_an_operator_may_give_addresses_created_without_a_lifetime_one(clock):
    default = LambdaClient.in_memory(clock).provision()
    assert default["address"]["expires_at"] is None, "as with AgentAddress, by default"
    api = LambdaClient.in_memory(clock, default_expires_in_seconds=3600)
    created = api.provision()
    expires = datetime.fromisoformat(created["address"]["expires_at"]).timestamp()
    assert expires == int(clock()) + 3600
    asked = api.provision(expires_in_seconds=120)
    assert datetime.fromisoformat(asked["address"]["expires_at"]).timestamp() == int(clock()) + 120
    assert (
        api.request("GET", "/.well-known/agentaddress.json").json()["limits"]["expires_in_seconds"]["default"] == 3600
    )
    with pytest.raises(InvalidSetting):
        settings_for_tests(default_expires_in_seconds=30)


def test_creation_is_rate_limited_per_client_ip(clock):
    api = LambdaClient.in_memory(clock, create_rate_per_minute=3)
    for _ in range(3):
        api.provision()
    refused = api.request("POST", "/api/v1/addresses")
    assert refused.status == 429
    assert refused.error_code == "rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    api.source_ip = "198.51.100.1"
    assert api.request("POST", "/api/v1/addresses").status == 201, "another client is not limited"
    api.source_ip = "203.0.113.7"
    clock.advance(61)
    assert api.request("POST", "/api/v1/addresses").status == 201, "the window recovers"


def test_a_client_address_that_is_no_ip_counts_as_one_unknown_client(moto_env, clock):
    """Behind a trusted proxy `cairn serve` takes X-Forwarded-For as the client: 2 KB of it made a rate key
    DynamoDB refused (500), and any other string a fresh allowance."""
    api = LambdaClient.on_moto(clock, create_rate_per_minute=3)
    for garbage in ("B" * 2100, "not-an-ip", "1.2.3.4.5"):
        api.source_ip = garbage
        assert api.request("POST", "/api/v1/addresses").status == 201, garbage
    api.source_ip = "another"
    assert api.request("POST", "/api/v1/addresses").error_code == "rate_limited"
    api.source_ip = "2001:db8::1"
    assert api.request("POST", "/api/v1/addresses").status == 201, "an address is a client of its own"


@pytest.mark.parametrize(
    "inbox",
    [{"keep_headers": [], **{f"e{n}": 1 for n in range(5_000)}}, {"keep_headers": [], "x" * 100_000: 1}],
    ids=["5,000 unknown fields", "a field named in 100 KB"],
)
def test_a_request_with_many_or_huge_problems_is_answered_in_a_few_kilobytes(memory_api: LambdaClient, inbox):
    """Every problem was named twice, whole: 480,000 unknown fields made a 60 MB answer."""
    reply, size = memory_api.sent("POST", "/api/v1/addresses", json_body={"inbox": inbox})
    assert (reply.status, reply.error_code) == (422, "invalid_request")
    assert size < 12_000 and 1 <= len(reply.json()["error"]["fields"]) <= 20
    if len(inbox) > 2:
        assert reply.json()["error"]["message"].endswith("; and 4980 more")


def test_a_validated_body_of_more_values_than_validation_can_name_is_refused_before_it(memory_api: LambdaClient):
    """Validation holds about 1.5 KB for each problem it names: 6 MB of unknown fields took the function past
    its memory."""
    extras = {f"e{n}": 1 for n in range(jsontext.MAX_VALIDATED_VALUES + 1)}
    reply, size = memory_api.sent("POST", "/api/v1/addresses", json_body={"inbox": {"keep_headers": [], **extras}})
    assert (reply.status, reply.error_code) == (413, "payload_too_large") and size < 1_000
    assert reply.json()["error"]["max_values"] == jsontext.MAX_VALIDATED_VALUES


def test_values_are_counted_outside_strings_only():
    commas = "," * 20
    assert not jsontext.holds_more_values('{"a": "' + commas + '"}', 10)
    assert not jsontext.holds_more_values('{"a": "\\"' + commas + '\\\\"}', 10)  # escaped quote, then backslash
    assert jsontext.holds_more_values("[" + "0," * 20 + "0]", 10)
    assert jsontext.holds_more_values('{"a": "\\\\"' + commas + '"}', 10)  # the string ended after its backslash


# -- inbox --------------------------------------------------------------------


def test_inbox_accepts_then_deduplicates_by_idempotency_key(memory_api: LambdaClient):
    created = memory_api.provision()
    first = memory_api.post_inbox(created, {"type": "demo.callback", "data": {"ok": True}}, key="task:callback")
    assert first.status == 202
    assert first.json()["duplicate"] is False
    again = memory_api.post_inbox(created, {"type": "demo.callback", "data": {"ok": True}}, key="task:callback")
    assert again.status == 200
    assert again.json() == {"duplicate": True, "event": first.json()["event"]}
    assert len(events_of(memory_api.poll(created))) == 1


def test_same_key_with_another_body_is_refused_and_changes_nothing(memory_api: LambdaClient):
    created = memory_api.provision()
    memory_api.post_inbox(created, {"n": 1}, key="k")
    reused = memory_api.post_inbox(created, {"n": 2}, key="k")
    assert reused.status == 422
    assert reused.error_code == "idempotency_key_reused"
    assert [e["data"] for e in events_of(memory_api.poll(created))] == [{"n": 1}]


def test_key_order_and_whitespace_do_not_make_a_different_body(memory_api: LambdaClient):
    created = memory_api.provision()
    url = path_of(created["endpoints"]["inbox_url"])
    headers = {"Idempotency-Key": "k"}
    assert memory_api.request("POST", url, body='{"a": 1, "b": 2}', headers=headers).status == 202
    assert memory_api.request("POST", url, body='{"b":2,"a":1}', headers=headers).status == 200


def test_inbox_size_limit_is_exact_and_answers_json(memory_api: LambdaClient):
    created = memory_api.provision()
    url = path_of(created["endpoints"]["inbox_url"])
    prefix, suffix = '{"data":"', '"}'
    at_limit = prefix + "x" * (INBOX_LIMIT - len(prefix) - len(suffix)) + suffix
    assert len(at_limit) == INBOX_LIMIT
    accepted = memory_api.request("POST", url, body=at_limit)
    assert accepted.status == 202
    over = memory_api.request("POST", url, body=json.dumps({"data": "x" * 1_000_001}))
    assert over.status == 413
    assert over.error_code == "payload_too_large"
    events = events_of(memory_api.poll(created))
    assert len(events) == 1
    assert events[0]["data"] == "x" * (INBOX_LIMIT - len(prefix) - len(suffix))


def test_inbox_refuses_malformed_json_and_bad_keys(memory_api: LambdaClient):
    created = memory_api.provision()
    url = path_of(created["endpoints"]["inbox_url"])
    assert memory_api.request("POST", url, body="{not json").error_code == "invalid_json"
    assert memory_api.request("POST", url, body=b"\xff\xfe{}").error_code == "invalid_json"
    assert memory_api.request("POST", url, body="[" * 10_000 + "]" * 10_000).error_code == "invalid_json"
    too_long = memory_api.post_inbox(created, {"a": 1}, key="k" * 256)
    assert too_long.status == 400
    assert too_long.error_code == "invalid_request"
    assert events_of(memory_api.poll(created)) == []


def test_wrong_inbox_secret_is_unauthorized(memory_api: LambdaClient):
    created = memory_api.provision()
    url = path_of(created["endpoints"]["inbox_url"]).rsplit("/", 1)[0] + "/wrong"
    reply = memory_api.request("POST", url, json_body={"a": 1})
    assert reply.status == 401
    assert reply.error_code == "unauthorized"
    assert events_of(memory_api.poll(created)) == []


def test_full_feed_is_refused_until_events_expire(clock):
    api = LambdaClient.in_memory(clock, max_events=3, owner_reserved_events=0, event_retention_seconds=3600)
    created = api.provision()
    for n in range(3):
        assert api.post_inbox(created, {"n": n}, key=f"k{n}").status == 202
    full = api.post_inbox(created, {"n": 3})
    assert full.status == 409
    assert full.error_code == "quota_exceeded"
    assert api.post_inbox(created, {"n": 0}, key="k0").status == 200, "a retained duplicate uses no slot"
    clock.advance(3601)
    assert events_of(api.poll(created)) == [], "expired events are invisible at once"
    assert api.post_inbox(created, {"n": 4}).status == 202, "expiry frees the slots"
    assert [e["sequence"] for e in events_of(api.poll(created))] == [4]


def test_inbox_payload_above_one_item_round_trips(memory_api: LambdaClient):
    created = memory_api.provision()
    text = "é" * 400_000  # 800,000 bytes of UTF-8: stored in several chunk items
    body = json.dumps({"data": {"text": text}}, ensure_ascii=False)
    assert memory_api.request("POST", path_of(created["endpoints"]["inbox_url"]), body=body).status == 202
    assert events_of(memory_api.poll(created))[0]["data"] == {"text": text}


# -- feed ---------------------------------------------------------------------


def test_poll_pages_with_cursor_limit_and_has_more(memory_api: LambdaClient):
    created = memory_api.provision()
    for n in range(5):
        memory_api.post_inbox(created, {"type": "step", "data": {"n": n}})
    page = memory_api.poll(created, after=0, limit=2).json()
    assert [e["sequence"] for e in page["events"]] == [1, 2]
    assert page["next_cursor"] == 2 and page["has_more"] is True
    page = memory_api.poll(created, after=2, limit=3).json()
    assert [e["data"]["n"] for e in page["events"]] == [2, 3, 4]
    assert page["next_cursor"] == 5 and page["has_more"] is False
    empty = memory_api.poll(created, after=5).json()
    assert empty == {"events": [], "next_cursor": 5, "has_more": False, "trimmed_through": 0}


def test_poll_validates_its_query(memory_api: LambdaClient):
    created = memory_api.provision()
    for query in ({"wait": 26}, {"limit": 0}, {"limit": 1001}, {"after": -1}, {"after": "x"}):
        reply = memory_api.poll(created, **query)
        assert reply.status == 422, query
        assert reply.error_code == "invalid_request"
        assert reply.json()["error"]["fields"]
    for wait in ("NaN", "inf"):
        reply = memory_api.poll(created, wait=wait)
        assert reply.status == 422 and reply.error_code == "invalid_request"
        assert reply.json()["error"]["fields"] == [
            {"field": "query.wait", "message": "Input should be a finite number"}
        ]


def test_ack_is_idempotent_and_keeps_the_first_time(memory_api: LambdaClient, clock):
    created = memory_api.provision()
    memory_api.post_inbox(created, {"type": "demo.callback"})
    event = events_of(memory_api.poll(created))[0]
    token = created["credentials"]["read_token"]
    url = f"{path_of(created['endpoints']['events_url'])}/{event['id']}/ack"
    first = memory_api.request("POST", url, token=token)
    assert first.status == 200
    acked = first.json()["event"]
    assert acked["id"] == event["id"] and acked["sequence"] == 1 and acked["acknowledged_at"]
    clock.advance(5)
    assert memory_api.request("POST", url, token=token).json() == first.json()
    assert events_of(memory_api.poll(created))[0]["acknowledged_at"] == acked["acknowledged_at"]


@pytest.mark.parametrize("event_id", ["evt_99_abcdef01", "nonsense", "evt_1_wrongsfx"])
def test_ack_of_an_unknown_event_is_not_found(memory_api: LambdaClient, event_id: str):
    created = memory_api.provision()
    memory_api.post_inbox(created, {"a": 1})
    url = f"{path_of(created['endpoints']['events_url'])}/{event_id}/ack"
    reply = memory_api.request("POST", url, token=created["credentials"]["read_token"])
    assert reply.status == 404
    assert reply.error_code == "not_found"


def test_polls_are_rate_limited_per_address(clock):
    api = LambdaClient.in_memory(clock, poll_rate_per_minute=2)
    created = api.provision()
    other = api.provision()
    assert api.poll(created).status == 200
    assert api.poll(created).status == 200
    limited = api.poll(created)
    assert limited.status == 429
    assert limited.json()["error"]["retry_after_seconds"] == int(limited.headers["Retry-After"])
    assert api.poll(other).status == 200
    clock.advance(61)
    assert api.poll(created).status == 200, "the window recovers"


def test_read_tokens_are_compared_in_constant_time(memory_api: LambdaClient, monkeypatch):
    """Timing is too noisy to measure in a test; instead prove the comparison goes through hmac.compare_digest.

    A poll's token is a condition of its storage write, on the token's SHA-256 (whose timing tells nothing
    of the token); the refusal is decided here, in constant time.
    """
    import hmac

    from cairn import credentials

    compared: list[tuple[str, str]] = []
    constant_time = hmac.compare_digest

    def recording(left, right):
        compared.append((left, right))
        return constant_time(left, right)

    created = memory_api.provision()
    token = created["credentials"]["read_token"]
    monkeypatch.setattr(hmac, "compare_digest", recording)
    assert memory_api.poll(created).status == 200
    compared.clear()
    events_path = path_of(created["endpoints"]["events_url"])
    assert memory_api.request("GET", events_path, token="crt_wrong").status == 401
    assert compared == [(credentials.digest("crt_wrong"), credentials.digest(token))]


def test_an_unknown_address_costs_the_same_comparison_as_a_wrong_token(memory_api: LambdaClient, monkeypatch):
    """A refusal that skipped the hash for unknown ids was measurably faster (0.15-0.4 ms): an oracle for ids."""
    import hmac

    from cairn import credentials

    compared: list[str] = []
    constant_time = hmac.compare_digest

    def recording(left, right):
        compared.append(left)
        return constant_time(left, right)

    created = memory_api.provision()
    monkeypatch.setattr(hmac, "compare_digest", recording)
    unknown_id = "addr_" + "a" * 26
    for path in (f"/api/v1/addresses/{unknown_id}/events", f"/api/v1/addresses/{unknown_id}/state"):
        compared.clear()
        assert memory_api.request("GET", path, token="crt_wrong").status == 401
        assert compared == [credentials.digest("crt_wrong")], path
    compared.clear()
    assert memory_api.request("GET", path_of(created["endpoints"]["events_url"]), token="crt_wrong").status == 401
    assert compared == [credentials.digest("crt_wrong")]


def test_unknown_address_and_wrong_token_answer_identically(memory_api: LambdaClient):
    created = memory_api.provision()
    events_path = path_of(created["endpoints"]["events_url"])
    wrong = memory_api.request("GET", events_path, token="crt_wrong")
    unknown = memory_api.request("GET", "/api/v1/addresses/addr_unknown/events", token="crt_wrong")
    missing = memory_api.request("GET", events_path)
    assert wrong.status == unknown.status == missing.status == 401
    assert wrong.text == unknown.text == missing.text


# -- describe, delete, expiry -----------------------------------------------


def test_describe_reports_feed_depth(memory_api: LambdaClient):
    created = memory_api.provision(task_id="t")
    for n in range(3):
        memory_api.post_inbox(created, {"n": n})
    token = created["credentials"]["read_token"]
    first = events_of(memory_api.poll(created))[0]
    memory_api.request("POST", f"{path_of(created['endpoints']['events_url'])}/{first['id']}/ack", token=token)
    detail = memory_api.request("GET", path_of(created["endpoints"]["address_url"]), token=token).json()
    assert detail["address"]["task_id"] == "t"
    assert detail["feed"] == {"events": 3, "unacknowledged": 2, "last_sequence": 3, "max_events": 1000}
    assert "inbox_url" not in detail["endpoints"]


def test_delete_removes_everything_and_credentials_stop_at_once(moto_api: LambdaClient):
    created = moto_api.provision()
    moto_api.post_inbox(created, {"a": 1}, key="k")
    token = created["credentials"]["read_token"]
    address_path = path_of(created["endpoints"]["address_url"])
    reply = moto_api.request("DELETE", address_path, token=token)
    assert reply.status == 200
    assert reply.json() == {"address": {"id": created["address"]["id"]}, "deleted": True}
    assert moto_api.poll(created).status == 401
    assert moto_api.post_inbox(created, {"a": 2}).status == 401
    assert moto_api.request("DELETE", address_path, token=token).status == 401
    items = boto3.client("dynamodb", region_name="us-east-1").scan(TableName="cairn-test")["Items"]
    assert not [item for item in items if item["pk"]["S"] == f"A#{created['address']['id']}"]


def test_expired_address_is_never_served(memory_api: LambdaClient, clock):
    created = memory_api.provision(expires_in_seconds=60)
    assert memory_api.post_inbox(created, {"a": 1}).status == 202
    clock.advance(61)
    assert memory_api.poll(created).status == 401
    assert memory_api.post_inbox(created, {"a": 2}).status == 401


def test_the_owner_may_delete_an_expired_address_before_storage_reclaims_it(memory_api: LambdaClient, clock):
    created = memory_api.provision(expires_in_seconds=60)
    address_path = path_of(created["endpoints"]["address_url"])
    clock.advance(61)
    assert memory_api.request("DELETE", address_path, token="crt_wrong").status == 401
    assert memory_api.request("GET", address_path, token=created["credentials"]["read_token"]).status == 401
    deleted = memory_api.request("DELETE", address_path, token=created["credentials"]["read_token"])
    assert deleted.status == 200 and deleted.json() == {"address": {"id": created["address"]["id"]}, "deleted": True}
    assert memory_api.request("DELETE", address_path, token=created["credentials"]["read_token"]).status == 401


# -- discovery and errors -----------------------------------------------------


def test_skill_names_this_servers_endpoints(memory_api: LambdaClient):
    reply = memory_api.request("GET", "/skill.md")
    assert reply.status == 200
    for needle in ("http://cairn.test/api/v1/addresses", "credentials.read_token", "next_cursor", "ack"):
        assert needle in reply.text
    assert "/attachments/att_1" in reply.text and "/email/replay" in reply.text
    assert "http://cairn.test/api/v1/addresses/<id>/subscriptions" in reply.text
    # Every placeholder is filled with this deployment's value.
    assert "{{" not in reply.text and "Over 10000000 bytes: 413" in reply.text


def test_openapi_is_3_1_and_lists_every_route(memory_api: LambdaClient):
    document = memory_api.request("GET", "/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    assert {
        "/api/v1/addresses",
        "/api/v1/addresses/{address_id}",
        "/api/v1/addresses/{address_id}/events",
        "/api/v1/addresses/{address_id}/events/{event_id}/ack",
        "/api/v1/inbox/{address_id}/{secret}",
    } <= set(document["paths"])
    assert document["servers"][0]["url"] == "http://cairn.test"


def test_llms_full_holds_the_guide_every_route_every_error_code_and_the_limits(memory_api: LambdaClient):
    full = memory_api.request("GET", "/llms-full.txt")
    assert full.status == 200
    assert full.headers["Content-Type"].startswith("text/plain")
    text = full.text
    assert memory_api.request("GET", "/skill.md").text.rstrip() in text
    document = memory_api.request("GET", "/openapi.json").json()
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"## {method.upper()} {path}\n" in text
    server_errors = [kind for kind in vars(errors).values() if isinstance(kind, type) and "code" in vars(kind)]
    assert server_errors and all(f"- `{kind.code}`: " in text for kind in server_errors)
    assert "- `state_limit_exceeded`: 409 (keys) / 413 (bytes)" in text
    assert "`ingress_surface` string: Where the event entered Cairn" in text
    assert '"max_events_per_address": 1000' in text
    assert "{{" not in text and "http://cairn.test/api/v1/addresses" in text
    assert "/llms-full.txt" in memory_api.request("GET", "/llms.txt").text


def test_capabilities_and_health(memory_api: LambdaClient):
    limits = memory_api.request("GET", "/.well-known/agentaddress.json").json()["limits"]
    assert limits["max_events_per_address"] == 1000
    assert limits["max_inbox_bytes"] == INBOX_LIMIT
    assert limits["max_stored_bytes_per_address"] == 64 * 1024 * 1024
    assert memory_api.request("GET", "/llms.txt").status == 200
    assert memory_api.request("GET", "/healthz").json()["status"] == "ok"


def test_unknown_routes_answer_json(memory_api: LambdaClient):
    reply = memory_api.request("GET", "/nowhere")
    assert reply.status == 404
    assert reply.error_code == "not_found"


def test_address_routes_judge_the_bytes_not_the_label(memory_api: LambdaClient):
    """`curl -d` labels a JSON body as a form: JSON is JSON whatever its label, anything else `invalid_json`.

    Powertools would decode a form into the model (`task_id=x` as `["x"]`): the bytes are never read as a form.
    """
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert memory_api.request("POST", "/api/v1/addresses", body="", headers=form).status == 201
    refused = memory_api.request("POST", "/api/v1/addresses", body="task_id=x", headers=form)
    assert (refused.status, refused.error_code) == (400, "invalid_json")
    for label in ("application/x-www-form-urlencoded", "text/plain", "application/json; charset=utf-8"):
        created = memory_api.request(
            "POST", "/api/v1/addresses", body='{"task_id": "x"}', headers={"Content-Type": label}
        )
        assert created.status == 201 and created.json()["address"]["task_id"] == "x"


# -- answers Lambda can carry -------------------------------------------------


def test_a_feed_of_escaped_text_answers_in_pages_lambda_can_carry(memory_api: LambdaClient):
    """Six posts of 333,300 "€" (each under 1 MB) once made a 13 MB answer: Lambda refuses those, so no poll got past them."""
    created = memory_api.provision()
    inbox = path_of(created["endpoints"]["inbox_url"])
    for n in range(6):
        body = json.dumps({"type": f"big.{n}", "data": "€" * 333_300}, ensure_ascii=False).encode()
        assert memory_api.request("POST", inbox, body=body, headers={"Content-Type": "application/json"}).status == 202
    events_path = path_of(created["endpoints"]["events_url"])
    seen: list[str] = []
    after, pages = 0, 0
    while True:
        event = memory_api.event(
            "GET", f"{events_path}?after={after}&limit=100", token=created["credentials"]["read_token"]
        )
        answer = memory_api.app.resolve(event, {})
        assert len(json.dumps(answer)) < LAMBDA_ANSWER_LIMIT  # as Lambda writes the proxy answer
        page = json.loads(answer["body"])
        seen += [event["type"] for event in page["events"]]
        pages += 1
        if not page["has_more"]:
            break
        after = page["next_cursor"]
    assert seen == [f"big.{n}" for n in range(6)], "nothing lost, nothing repeated"
    assert pages > 1
