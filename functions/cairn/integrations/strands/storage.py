"""`CairnStorage`: Strands' `Storage` (bytes under keys) on an address's files.

Strands' snapshot session manager keeps an agent's latest snapshot and its
history through a `Storage`, and so can its other plugins. Each write
replaces a file in one commit, so a process that reads while another
writes gets the old snapshot or the new one, never a mix; the last write
wins, as in Strands' own backends. Keys are any text: `/` only reads as a
separator to a prefix listing. A file holds at most `MAX_FILE_BYTES`.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
from typing import Any

from strands.storage.storage import Storage
from strands.types.exceptions import StorageError

from cairn import errors
from cairn.client.address import Address
from cairn.client.http import json_body

# The server's limits (`cairn.files.files`).
MAX_FILE_BYTES = 3 * 1024 * 1024
MAX_LIST = 1000


class CairnStorage(Storage):
    """Strands' `Storage` whose files live in one Cairn address (its read token owns them).

    The calls are Strands' async ones; each runs the address's HTTP client
    (timeouts, retries on 429 and 5xx) on a worker thread. A refusal or an
    unreachable server raises `StorageError`, as the protocol asks.
    """

    def __init__(self, address: Address) -> None:
        self._http = address.http
        self._token = address.read_token
        self._url = f"{address.address_url}/files"

    @classmethod
    def connect(cls, base_url: str, address_id: str, read_token: str) -> CairnStorage:
        return cls(Address.connect(base_url, address_id, read_token))

    async def write(self, key: str, data: bytes) -> None:
        if len(data) > MAX_FILE_BYTES:
            raise StorageError(f"Cairn keeps files of at most {MAX_FILE_BYTES} bytes; {key!r} has {len(data)}.")
        await self._post("", {"key": key, "data": base64.b64encode(data).decode("ascii")})

    async def read(self, key: str) -> bytes | None:
        answer = await self._post("/read", {"key": key}, missing=True)
        return None if answer is None else base64.b64decode(answer["data"])

    async def delete(self, key: str) -> None:
        await self._post("/delete", {"key": key})

    async def list(self, query: str) -> builtins.list[str]:
        found: builtins.list[str] = []
        request: dict[str, Any] = {"prefix": query, "limit": MAX_LIST}
        while True:
            page = await self._post("/list", request)
            found.extend(page["keys"])
            if not page["next"]:
                return found
            request = {**request, "after": page["next"]}

    async def _post(self, path: str, request: dict[str, Any], *, missing: bool = False) -> Any:
        """The answer's JSON; None for a file not there when `missing` allows it."""
        return await asyncio.to_thread(self._send, path, request, missing)

    def _send(self, path: str, request: dict[str, Any], missing: bool) -> Any:
        try:
            return self._http.request("POST", self._url + path, token=self._token, body=json_body(request)).json()
        except errors.CairnError as error:
            if missing and isinstance(error, errors.NotFound):
                return None
            raise StorageError(f"Cairn's files{path or ' write'}: {error}") from error
