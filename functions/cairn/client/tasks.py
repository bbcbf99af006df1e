"""Where the `cairn` command keeps each task's address: `$CAIRN_HOME/tasks`, by default ~/.cairn/tasks.

One owner-only file per task, named by the SHA-256 of the task name (so any
name makes a safe file name): `<digest>.json` is a saved `Address`, which
`Address.restore` reads as well, and `<digest>.cursor` the last sequence
acknowledged through the command.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from cairn.client.address import Address
from cairn.client.cursor import CursorFile
from cairn.client.http import HttpClient
from cairn.client.private import ensure_private_dir
from cairn.disk import write_durably


class TaskStore:
    def __init__(self, home: Path) -> None:
        self.directory = home / "tasks"

    @classmethod
    def from_environment(cls) -> TaskStore:
        home = os.environ.get("CAIRN_HOME")
        return cls(Path(home) if home else Path.home() / ".cairn")

    def address_path(self, task: str) -> Path:
        return self.directory / f"{_digest(task)}.json"

    def cursor(self, task: str) -> CursorFile:
        return CursorFile(self.directory / f"{_digest(task)}.cursor")

    def exists(self, task: str) -> bool:
        return self.address_path(task).exists()

    def prepare(self) -> None:
        """Make the task folder (owner-only) if missing; `UnsafeFile` or `OSError` where none can be."""
        ensure_private_dir(self.directory)

    def save(self, task: str, address: Address) -> Path:
        """Keep a newly provisioned address; `FileExistsError` if the task already has one."""
        self.prepare()
        path = self.address_path(task)
        write_durably(path, address.to_json().encode(), exclusive=True)
        return path

    def load(self, task: str, *, http: HttpClient) -> Address:
        """The task's address; `FileNotFoundError` if it has none, `UnsafeFile` if its file is exposed."""
        return Address.restore(self.address_path(task), http=http)


def _digest(task: str) -> str:
    return hashlib.sha256(task.encode()).hexdigest()
