"""The SDK's HTTP layer: typed errors from the wire, bounded retries honouring Retry-After, deadlines."""

from __future__ import annotations

import json

import httpx
import pytest

from cairn.client import (
    CairnError,
    ConnectionFailed,
    HttpClient,
    NotFound,
    RateLimited,
    RetryPolicy,
    RevisionConflict,
    StateLimitExceeded,
    Unauthorized,
    Unavailable,
)
from cairn.client import http as http_module

URL = "http://cairn.test/api/v1/addresses/addr_x/state/todo"


class Script:
    """A transport answering from a list, recording what it was sent."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def error(status: int, code: str, headers: dict[str, str] | None = None, **details) -> httpx.Response:
    body = {"error": {"code": code, "message": f"{code} happened", **details}}
    return httpx.Response(status, json=body, headers=headers)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(http_module.time, "sleep", slept.append)
    return slept


def client(script: Script, **policy) -> HttpClient:
    return HttpClient(transport=httpx.MockTransport(script), retry=RetryPolicy(**policy))


def test_errors_are_the_servers_classes_with_their_details(sleeps):
    script = Script(
        error(409, "revision_conflict", current_revision=3, key="todo"),
        error(404, "not_found", key="todo"),
        error(401, "unauthorized"),
        error(413, "state_limit_exceeded", max_bytes=65536),
        error(418, "teapot_refused", pot="full"),
        httpx.Response(403, json={"message": "Forbidden"}),
    )
    http = client(script)
    with pytest.raises(RevisionConflict) as conflict:
        http.request("PUT", URL)
    assert (conflict.value.code, conflict.value.status) == ("revision_conflict", 409)
    assert conflict.value.current_revision == 3
    with pytest.raises(NotFound) as missing:
        http.request("GET", URL)
    assert missing.value.details == {"key": "todo"}
    with pytest.raises(Unauthorized):
        http.request("GET", URL)
    with pytest.raises(StateLimitExceeded) as too_big:
        http.request("PUT", URL)
    assert (too_big.value.status, too_big.value.details["max_bytes"]) == (413, 65536)
    with pytest.raises(CairnError) as unknown:
        http.request("GET", URL)
    assert (unknown.value.code, unknown.value.status, unknown.value.details) == ("teapot_refused", 418, {"pot": "full"})
    with pytest.raises(CairnError) as bare:
        http.request("GET", URL)
    assert (bare.value.code, bare.value.status) == ("http_error", 403)
    assert len(script.requests) == 6, "a client error is never retried"
    assert sleeps == []


def test_a_429_waits_as_long_as_retry_after_says_then_succeeds(sleeps):
    script = Script(
        error(429, "rate_limited", {"Retry-After": "2"}, retry_after_seconds=2),
        httpx.Response(200, json={"ok": True}),
    )
    assert client(script).request("GET", URL).json() == {"ok": True}
    assert sleeps == [2.0]


def test_5xx_answers_are_retried_with_jittered_back_off_a_bounded_number_of_times(sleeps):
    script = Script(*[error(503, "temporarily_unavailable") for _ in range(3)])
    with pytest.raises(Unavailable) as busy:
        client(script, attempts=3, base_delay=0.1).request("GET", URL)
    assert busy.value.retry_after == 1
    assert len(script.requests) == 3
    assert len(sleeps) == 2
    assert all(0 <= delay <= 0.1 * 2**attempt for attempt, delay in enumerate(sleeps, 1))


def test_a_retry_after_beyond_the_policy_is_raised_instead_of_slept(sleeps):
    script = Script(error(429, "rate_limited", {"Retry-After": "45"}))
    with pytest.raises(RateLimited) as limited:
        client(script, max_delay=30).request("GET", URL)
    assert limited.value.retry_after == 45
    assert sleeps == []


@pytest.mark.parametrize(
    "answer",
    [
        error(429, "rate_limited", {"Retry-After": "inf"}),
        httpx.Response(
            429, content=b'{"error": {"code": "rate_limited", "message": "m", "retry_after_seconds": 1e400}}'
        ),
        error(429, "rate_limited", retry_after_seconds=True),
    ],
    ids=["header inf", "body 1e400", "body true"],
)
def test_a_retry_after_no_clock_can_wait_is_ignored(sleeps, answer: httpx.Response):
    """`inf` raised an OverflowError from the SDK instead of the typed error."""
    with pytest.raises(RateLimited) as limited:
        client(Script(answer), attempts=1).request("GET", URL)
    assert limited.value.retry_after == 1


@pytest.mark.parametrize("details", [{"self": 1}, {"limit": "x", "self": 3}, {"retry_after": "x"}])
def test_details_named_like_a_constructors_arguments_still_make_the_typed_error(sleeps, details: dict):
    for code, kind in (("state_limit_exceeded", StateLimitExceeded), ("not_found", NotFound), ("odd", CairnError)):
        answer = httpx.Response(409, json={"error": {"code": code, "message": "m", **details}})
        with pytest.raises(kind) as raised:
            client(Script(answer)).request("GET", URL)
        assert (raised.value.code, raised.value.message) == (code, "m")


def test_a_refused_connection_is_retried_but_a_timeout_is_not(sleeps):
    refused = httpx.ConnectError("refused")
    script = Script(refused, refused, httpx.Response(200, json={}))
    assert client(script).request("GET", URL).status_code == 200
    assert len(sleeps) == 2

    script = Script(httpx.ReadTimeout("slow"))
    with pytest.raises(ConnectionFailed) as failed:
        client(script).request("PUT", URL)
    assert len(script.requests) == 1, "a request that may have been applied is not sent again"
    assert failed.value.code == "connection_failed"


def test_connection_errors_name_the_host_but_never_the_url():
    secret_inbox = "http://cairn.test/api/v1/inbox/addr_x/s3cr3t-capability"
    script = Script(httpx.ReadTimeout("slow"))
    with pytest.raises(ConnectionFailed) as failed:
        client(script).request("POST", secret_inbox)
    assert "cairn.test" in failed.value.message
    assert "s3cr3t" not in failed.value.message


def test_every_request_has_a_deadline_longer_than_its_long_poll():
    seen: list[dict] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return httpx.Response(200, json={})

    http = HttpClient(timeout=10, transport=httpx.MockTransport(record))
    http.request("GET", URL)
    http.request("GET", URL, wait=25)
    assert seen[0]["read"] == 10
    assert seen[1]["read"] == 35


def test_bearer_and_json_body_are_sent_as_the_api_expects():
    script = Script(httpx.Response(200, json={}))
    client(script).request("PUT", URL, token="crt_abc", body=b'{"value": 1}')
    [sent] = script.requests
    assert sent.headers["authorization"] == "Bearer crt_abc"
    assert sent.headers["content-type"] == "application/json"
    assert json.loads(sent.content) == {"value": 1}
    assert sent.headers["user-agent"].startswith("cairn-python/")


def _cairn_error_classes() -> list[type[CairnError]]:
    from cairn import errors

    found: list[type[CairnError]] = []
    pending: list[type[CairnError]] = [CairnError]
    while pending:
        kind = pending.pop()
        pending.extend(kind.__subclasses__())
        if "code" in vars(kind) and kind.__module__ == errors.__name__ and kind is not CairnError:
            found.append(kind)
    return sorted(found, key=lambda kind: kind.code)


def _instance(kind: type[CairnError]) -> CairnError:
    """One error of `kind`, as a use case raises it."""
    if issubclass(kind, StateLimitExceeded):
        return kind("Too many bytes.", limit="bytes", max_bytes=10)
    if kind is Unauthorized:
        return kind()
    if issubclass(kind, (RateLimited, Unavailable)):
        return kind("Later.", retry_after=3)
    return kind("Refused.", field="x")


@pytest.mark.parametrize("kind", _cairn_error_classes(), ids=lambda kind: kind.code)
def test_every_error_the_server_answers_is_rebuilt_by_the_sdk_as_its_own_class(kind: type[CairnError]):
    from cairn.api.errors import cairn_error_response
    from cairn.client.errors import error_from

    raised = _instance(kind)
    answer = cairn_error_response(raised)
    response = httpx.Response(answer.status_code, headers=answer.headers, content=str(answer.body).encode())

    rebuilt = error_from(response)

    assert type(rebuilt) is kind and rebuilt.code == kind.code
    assert rebuilt.status == answer.status_code == raised.http_status
    assert rebuilt.message == raised.message
    if isinstance(raised, (RateLimited, Unavailable)):
        assert rebuilt.retry_after == 3 and answer.headers["Retry-After"] == "3"
    elif kind is not Unauthorized:
        assert {key: rebuilt.details[key] for key in raised.details} == raised.details
