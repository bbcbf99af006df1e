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
import builtins
from collections.abc import Callable
from typing import TypeVar

from strands.storage.storage import Storage
from strands.types.exceptions import StorageError

from cairn import errors
from cairn.client.address import Address
from cairn.integrations.settled import settled

# The server's limit (`cairn.files.files`).
MAX_FILE_BYTES = 3 * 1024 * 1024

_T = TypeVar("_T")


class CairnStorage(Storage):
    """Strands' `Storage` whose files live in one Cairn address (its read token owns them).

    The calls are Strands' async ones; each runs the address's files client
    (`address.files`: timeouts, retries on 429 and 5xx) on a worker thread. A
    refusal or an unreachable server raises `StorageError`, as the protocol asks.
    """

    def __init__(self, address: Address) -> None:
        self._files = address.files

    @classmethod
    def connect(cls, base_url: str, address_id: str, read_token: str) -> CairnStorage:
        return cls(Address.connect(base_url, address_id, read_token))

    async def write(self, key: str, data: bytes) -> None:
        if len(data) > MAX_FILE_BYTES:
            raise StorageError(f"Cairn keeps files of at most {MAX_FILE_BYTES} bytes; {key!r} has {len(data)}.")
        await self._run("write", lambda: self._files.write(key, data), settle=True)

    async def read(self, key: str) -> bytes | None:
        return await self._run("read", lambda: self._files.read(key))

    async def delete(self, key: str) -> None:
        await self._run("delete", lambda: self._files.delete(key), settle=True)

    async def list(self, query: str) -> builtins.list[str]:
        return await self._run("list", lambda: builtins.list(self._files.keys(query)))

    async def _run(self, what: str, call: Callable[[], _T], *, settle: bool = False) -> _T:
        """`call` on a worker thread. `settle`, for a write: a cancellation meanwhile is raised once it has
        answered (`cairn.integrations.settled`). The last write wins, so a write still on its way when its
        caller went on could land over a newer snapshot that a resumed run stored."""
        try:
            return await (settled(call) if settle else asyncio.to_thread(call))
        except errors.CairnError as error:
            raise StorageError(f"Cairn's files {what}: {error}") from error
