"""The SDK's one HTTP client: timeouts always set, typed errors, bounded retries.

Every request has a deadline longer than the long-poll wait it asks the
server for, so no call hangs. Answers that mean "try again" (429 and 5xx)
and connections that never opened are retried a bounded number of times,
honouring `Retry-After`; every other failure raises its typed error at once.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

import cairn
from cairn.client.errors import ConnectionFailed, error_from, retry_after
from cairn.errors import CairnError
from cairn.tls import verified_context

DEFAULT_TIMEOUT = 10.0
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
USER_AGENT = f"cairn-python/{cairn.__version__}"


def jittered(attempt: int, *, base: float, cap: float) -> float:
    """Full-jitter exponential back-off: a random delay up to `base * 2**attempt`, at most `cap`.

    Randomness keeps writers that collided once from colliding again in step.
    """
    return random.uniform(0, min(cap, base * 2**attempt))


def json_body(value: Any) -> bytes:
    """JSON as the API reads it; NaN and infinities fail here rather than at the server."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False).encode()


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry an answer that says "try again"."""

    attempts: int = 4
    base_delay: float = 0.25
    # A longer Retry-After is the caller's decision, not a silent sleep: it raises.
    max_delay: float = 30.0


class HttpClient:
    """An `httpx.Client` with Cairn's conventions; share one between addresses."""

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy = RetryPolicy(),
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`timeout` bounds each request beyond its long-poll wait; `transport` is for tests."""
        self.timeout = timeout
        self.retry = retry
        self._client = httpx.Client(
            timeout=timeout, transport=transport, headers={"User-Agent": USER_AGENT}, verify=verified_context()
        )

    def request(
        self,
        method: str,
        url: str,
        *,
        token: str | None = None,
        body: bytes | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        wait: float = 0.0,
    ) -> httpx.Response:
        """Send one request, retrying as the policy allows; a 2xx answer or a typed error."""
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        if body is not None:
            all_headers["Content-Type"] = "application/json"
        timeout = httpx.Timeout(self.timeout + wait)
        policy = self.retry
        attempt = 0
        while True:
            try:
                response = self._client.request(
                    method, url, content=body, params=params, headers=all_headers, timeout=timeout
                )
            except (httpx.ConnectError, httpx.ConnectTimeout) as error:
                # The request never left: retrying cannot apply anything twice.
                failure: CairnError = ConnectionFailed(f"Cannot connect to {httpx.URL(url).host}: {error}")
                delay = jittered(attempt, base=policy.base_delay, cap=policy.max_delay)
            except httpx.HTTPError as error:
                # URLs may hold an inbox secret: name the host only.
                raise ConnectionFailed(f"No answer from {httpx.URL(url).host}: {error!r}") from error
            else:
                if response.is_success:
                    return response
                failure = error_from(response)
                if response.status_code not in RETRY_STATUSES:
                    raise failure
                asked = retry_after(response)
                delay = asked if asked is not None else jittered(attempt, base=policy.base_delay, cap=policy.max_delay)
            attempt += 1
            if attempt >= policy.attempts or delay > policy.max_delay:
                raise failure
            time.sleep(delay)

    @contextmanager
    def stream(
        self, url: str, *, token: str, params: dict[str, Any], headers: dict[str, str], idle: float
    ) -> Iterator[httpx.Response]:
        """A GET whose 2xx answer is read as it arrives, or a typed error; never retried.

        `idle`: how long the answer may go without a byte beyond `timeout` (a
        stream's heartbeats come that often). A connection lost while reading
        raises `ConnectionFailed` too; a follower reconnects from its cursor.
        """
        all_headers = {**headers, "Authorization": f"Bearer {token}"}
        timeout = httpx.Timeout(self.timeout, read=self.timeout + idle)
        try:
            with self._client.stream("GET", url, params=params, headers=all_headers, timeout=timeout) as response:
                if not response.is_success:
                    response.read()
                    raise error_from(response)
                yield response
        except httpx.HTTPError as error:
            raise ConnectionFailed(f"Stream from {httpx.URL(url).host} broke: {error!r}") from error

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
