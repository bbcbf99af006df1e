"""What a client keeps from provisioning: the paths it calls and its read token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

PROVISION_PATH = "/api/v1/addresses"


@dataclass(frozen=True)
class Address:
    inbox_path: str
    events_path: str
    state_path: str
    read_token: str

    @classmethod
    def from_provisioned(cls, body: dict[str, Any]) -> Address:
        endpoints = body["endpoints"]
        return cls(
            inbox_path=urlsplit(endpoints["inbox_url"]).path,
            events_path=urlsplit(endpoints["events_url"]).path,
            state_path=urlsplit(endpoints["state_url"]).path,
            read_token=body["credentials"]["read_token"],
        )

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.read_token}"}

    def ack_path(self, event_id: str) -> str:
        return f"{self.events_path}/{event_id}/ack"

    def state_key_path(self, key: str) -> str:
        return f"{self.state_path}/{key}"


def inbox_body(number: int) -> dict[str, Any]:
    """A small callback, the common case (no chunking)."""
    return {"type": "bench.tick", "source": "bench", "data": {"n": number}}
