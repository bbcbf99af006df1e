"""Owner-only files for credentials and cursors.

A read token is a bearer credential: whoever can read the file holds the
address. Directories are created 0700 and files 0600, written atomically (a
crash leaves the old file or the new one, never half of one) and durably (the
directory entry is flushed too, so a file written before a power cut is
there after it: `cairn.disk.write_durably` writes them), and refused on read
when they are symbolic links, belong to someone else, or are open to the
group or the world.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class UnsafeFile(Exception):
    """A credential file that someone else could read or swap."""


def ensure_private_dir(path: str | Path) -> Path:
    """`path` as a directory, creating every missing level with mode 0700."""
    path = Path(path)
    missing = []
    level = path
    while not level.exists() and not level.is_symlink():
        missing.append(level)
        level = level.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
    if path.is_symlink() or not path.is_dir():
        raise UnsafeFile(f"{path} is not a plain directory.")
    return path


@contextmanager
def locked(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock for `path` (on an owner-only `.<name>.lock` beside it) until the block ends."""
    import fcntl  # POSIX: `cairn.client` stays importable where it is missing

    path = Path(path)
    descriptor = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def read_private(path: str | Path) -> bytes:
    """The bytes of an owner-only regular file; `UnsafeFile` for anything else."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafeFile(f"{path} is a symbolic link; credentials are only read from plain files.") from error
        raise
    with os.fdopen(descriptor, "rb") as file:
        # Checked on the open file, so the answer is about what is read.
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(f"{path} is not a regular file.")
        if info.st_uid != os.getuid():
            raise UnsafeFile(f"{path} belongs to another user.")
        if info.st_mode & 0o077:
            mode = stat.S_IMODE(info.st_mode)
            raise UnsafeFile(f"{path} is open to other users (mode {mode:o}); run: chmod 600 {path}")
        return file.read()
