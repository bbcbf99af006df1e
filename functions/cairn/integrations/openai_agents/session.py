"""`CairnSession`: the OpenAI Agents SDK's `Session` on an address's session routes.

Every method is one request (a long read, a few): an add commits whole and
after every earlier add, a pop takes an item no other process gets, and a
read sees only committed adds, so any number of processes, machines or
Lambda invocations can share one session. Items are the SDK's input items,
JSON objects stored and answered exactly.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from agents.items import TResponseInputItem
from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings, resolve_session_limit

from cairn.client.address import Address
from cairn.client.http import HttpClient, json_body
from cairn.client.paths import segment


class CairnSession(SessionABC):
    """A conversation kept in a Cairn address, under `session_id`.

    The address's read token owns it; it goes when the address is deleted or
    expires. The SDK's async methods run each HTTP call on a worker thread,
    through the address's client (timeouts, retries on 429 and 5xx).
    """

    def __init__(self, address: Address, session_id: str, *, session_settings: SessionSettings | None = None) -> None:
        self.session_id = session_id
        self.session_settings = session_settings or SessionSettings()
        self.address = address
        self._http: HttpClient = address.http
        self._url = f"{address.address_url}/sessions/{segment(session_id, 'session id')}/items"
        self._token = address.read_token

    @classmethod
    def connect(cls, base_url: str, address_id: str, read_token: str, session_id: str, **kwargs: Any) -> CairnSession:
        """A session of the address known by id and read token."""
        return cls(Address.connect(base_url, address_id, read_token), session_id, **kwargs)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The newest `limit` items (every item when None), oldest first."""
        return await asyncio.to_thread(self._get_items, resolve_session_limit(limit, self.session_settings))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Add the items after every item already there, all in one commit."""
        if items:
            # One id for every attempt of this add: a retry after a lost answer adds nothing twice.
            body = {"items": list(items), "add_id": uuid.uuid4().hex}
            await asyncio.to_thread(self._request, "POST", "", body)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item; no other process gets the same one."""
        # One id for every attempt of this pop: a retry after a lost answer takes no second item.
        answer = await asyncio.to_thread(self._request, "POST", "/pop", None, {"pop_id": uuid.uuid4().hex})
        item: TResponseInputItem | None = answer["item"]
        return item

    async def clear_session(self) -> None:
        await asyncio.to_thread(self._request, "DELETE", "", None)

    def _get_items(self, limit: int | None) -> list[TResponseInputItem]:
        """Page back from the newest until `limit` items (or the oldest) are read."""
        found: list[TResponseInputItem] = []
        before: int | None = None
        while limit is None or len(found) < limit:
            params: dict[str, Any] = {} if limit is None else {"limit": limit - len(found)}
            if before is not None:
                params["before"] = before
            page = self._http.request("GET", self._url, token=self._token, params=params).json()
            found = page["items"] + found
            before = page["next"]
            if before is None:
                break
        return found

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None, params: dict[str, Any] | None = None
    ) -> Any:
        payload = None if body is None else json_body(body)
        return self._http.request(method, self._url + path, token=self._token, body=payload, params=params).json()
