"""The runtime key `cairn serve` makes for itself when it is given none, and its server secret.

Without a key the runtime and memory routes would be open to every local
process. A generated key lives in the data directory, readable by its owner
only, and is reused on every later start, so workers configured once keep
working across restarts. The server secret (`cairn.server_secret`) is kept
the same way, beside the data it opens.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from cairn.disk import write_durably

FILE_NAME = "runtime-key"
SERVER_SECRET_FILE_NAME = "server-secret"


def load_or_create(path: Path) -> str:
    """The key kept at `path`, made (owner-only, 0600) when the file is missing or empty."""
    existing = _read(path)
    if existing:
        # A copy made by hand (or an old umask) may be readable by others: keep it the owner's.
        path.chmod(0o600)
        return existing
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_urlsafe(32)
    data = (key + "\n").encode()
    try:
        # Whole or absent to every other start, and on disk before anything is signed or sealed with it.
        write_durably(path, data, exclusive=True)
    except FileExistsError:
        if made_meanwhile := _read(path):
            return made_meanwhile  # another start made it first: its key is the one in force
        write_durably(path, data)  # an empty file, left by a crash of a version that wrote in place
    return key


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""
