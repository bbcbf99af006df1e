"""An address's wake-up subscriptions: where its new events are pushed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.client.http import HttpClient, json_body
from cairn.client.paths import segment


class Subscriptions:
    """`addr.subscriptions`: create, list, read, delete, test and rotate (all with the read token)."""

    def __init__(self, http: HttpClient, address_url: str, read_token: str) -> None:
        self._http = http
        self._url = f"{address_url}/subscriptions"
        self._token = read_token

    def create(
        self, target: dict[str, Any], *, types: Sequence[str] | None = None, description: str | None = None
    ) -> dict[str, Any]:
        """Subscribe `target` (e.g. `{"kind": "webhook", "url": "https://..."}`) to events committed from now on.

        The answer is `{subscription, secret}`: a webhook's `secret`
        (`whsec_...`) is shown this once; keep it to verify deliveries with
        `cairn.client.webhooks.verify`. AWS targets the deployment allows:
        `sqs`, `eventbridge`, `lambda`, `step_functions` and
        `{"kind": "lambda_durable_callback", "callback_id": ...}`, which resumes
        a Lambda durable function waiting on that callback with the first
        matching event, once.
        """
        request: dict[str, Any] = {"target": target}
        if types is not None:
            request["types"] = list(types)
        if description is not None:
            request["description"] = description
        response = self._http.request("POST", self._url, token=self._token, body=json_body(request))
        created: dict[str, Any] = response.json()
        return created

    def list(self) -> list[dict[str, Any]]:
        """Every subscription with its status and recent delivery attempts."""
        response = self._http.request("GET", self._url, token=self._token)
        subscriptions: list[dict[str, Any]] = response.json()["subscriptions"]
        return subscriptions

    def get(self, subscription_id: str) -> dict[str, Any]:
        url = self._one(subscription_id)
        subscription: dict[str, Any] = self._http.request("GET", url, token=self._token).json()["subscription"]
        return subscription

    def delete(self, subscription_id: str) -> None:
        """Stop deliveries to it; `NotFound` if there is no such subscription."""
        self._http.request("DELETE", self._one(subscription_id), token=self._token)

    def test(self, subscription_id: str) -> dict[str, Any]:
        """Send a `subscription.test` delivery now; the attempt (outcome, status code or error)."""
        url = f"{self._one(subscription_id)}/test"
        attempt: dict[str, Any] = self._http.request("POST", url, token=self._token).json()["attempt"]
        return attempt

    def rotate(self, subscription_id: str) -> dict[str, Any]:
        """A new webhook secret (`{subscription, secret}`); the old one keeps signing for 24 hours."""
        response = self._http.request("POST", f"{self._one(subscription_id)}/rotate", token=self._token)
        rotated: dict[str, Any] = response.json()
        return rotated

    def _one(self, subscription_id: str) -> str:
        return f"{self._url}/{segment(subscription_id, 'subscription id')}"
