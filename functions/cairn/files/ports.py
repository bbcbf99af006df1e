"""What the files use case needs from storage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cairn.checkpoints.models import Owner

# What a file counts against its address's storage limit beyond its key and bytes: its item's own
# attributes (size, version, expiry), so that even empty files are bounded in number.
FILE_OVERHEAD = 64


def stored_bytes(key: str, size: int) -> int:
    """What a file of `size` bytes under `key` counts against its address's storage limit."""
    return len(key.encode()) + size + FILE_OVERHEAD


@dataclass(frozen=True)
class FilePage:
    """Keys in ascending order; `next` (the last key) when more may follow."""

    keys: tuple[str, ...]
    next: str | None


class FileStore(Protocol):
    def write(self, owner: Owner, key: str, data: bytes, *, now: float, max_bytes: int) -> None:
        """Replace the file under `key` whole, in one commit checked against the owner's address.

        `StorageLimitExceeded`, and nothing changed, when the address's files would then count
        more than `max_bytes` (`stored_bytes`, summed), whatever other writers commit at once.
        """
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
