"""Files written whole and kept: a crash or a power cut leaves the old file or the new one, never part of one.

The bytes go to a temporary name beside the file, reach the disk, and are
renamed into place; then the directory, which holds the new name, reaches the
disk too. Without that last step a file written just before a power cut can
be missing after it even though its bytes were flushed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_durably(path: str | Path, data: bytes, *, exclusive: bool = False) -> None:
    """`data` at `path`, owner-only (0600), in place whole and on disk when this returns.

    With `exclusive`, an existing file wins and `FileExistsError` is raised:
    two processes creating the same file cannot both believe they did.
    """
    path = Path(path)
    # Named apart from `path`, so a name as long as the file system takes still has room for it; the
    # leading dot keeps it out of listings that look for finished files.
    temporary = path.with_name(f".cairn-{secrets.token_hex(6)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if exclusive:
            os.link(temporary, path)
        else:
            os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    flush_directory(path.parent)


def flush_directory(directory: Path) -> None:
    """Put the directory's entries on disk: a rename changes the directory, not the file's data."""
    if not hasattr(os, "O_DIRECTORY"):  # Windows opens no directories; NTFS journals its renames
        return
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
