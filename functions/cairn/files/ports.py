"""What the files use case needs from storage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cairn.checkpoints.models import Owner


@dataclass(frozen=True)
class FilePage:
    """Keys in ascending order; `next` (the last key) when more may follow."""

    keys: tuple[str, ...]
    next: str | None


class FileStore(Protocol):
    def write(self, owner: Owner, key: str, data: bytes, *, now: float) -> None:
        """Replace the file under `key` whole, in one commit checked against the owner's address."""
        ...

    def read(self, address_id: str, key: str) -> bytes | None:
        """The file's bytes as one write left them; None when there is none."""
        ...

    def delete(self, owner: Owner, key: str, *, now: float) -> bool:
        """Remove the file; False when there was none."""
        ...

    def keys(self, address_id: str, prefix: str, *, after: str | None, limit: int) -> FilePage:
        """The keys starting with `prefix`, above `after`, ascending, at most `limit`."""
        ...
