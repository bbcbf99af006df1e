"""Owner-only credential files and cursors: how a saved address survives, and what it refuses."""

from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from cairn.client import Address, CursorFile, UnsafeFile
from cairn.client.private import ensure_private_dir, read_private
from cairn.client.tasks import TaskStore
from cairn.disk import write_durably

DOCUMENT = {
    "address": {"id": "addr_x", "email": "addr_x@cairn.localhost", "expires_at": None},
    "credentials": {"read_token": "crt_secret"},
    "endpoints": {
        "inbox_url": "http://cairn.test/api/v1/inbox/addr_x/s",
        "events_url": "http://cairn.test/api/v1/addresses/addr_x/events",
        "state_url": "http://cairn.test/api/v1/addresses/addr_x/state",
        "address_url": "http://cairn.test/api/v1/addresses/addr_x",
    },
}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_saved_address_is_owner_only_and_restores_identically(tmp_path: Path):
    address = Address(DOCUMENT)
    path = tmp_path / "address.json"
    address.save(path)
    assert mode(path) == 0o600
    restored = Address.restore(path)
    assert restored.to_dict() == DOCUMENT
    assert (restored.id, restored.read_token) == ("addr_x", "crt_secret")
    assert restored.inbox_url == DOCUMENT["endpoints"]["inbox_url"]
    assert "crt_secret" not in repr(restored)


def test_saving_again_replaces_the_file_atomically_and_leaves_no_temporary_files(tmp_path: Path):
    path = tmp_path / "address.json"
    write_durably(path, b"one")
    write_durably(path, b"two")
    assert read_private(path) == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["address.json"]


@pytest.mark.parametrize("exclusive", [False, True])
def test_a_written_file_is_flushed_and_then_its_directory_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exclusive: bool
):
    """After a power cut the file is there: its data, and then the directory holding its new name, reach the disk."""
    path = tmp_path / "address.json"
    flushed: list[tuple[int, bool]] = []
    real_fsync = os.fsync

    def recording_fsync(descriptor: int) -> None:
        flushed.append((os.fstat(descriptor).st_ino, path.exists()))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    write_durably(path, b"token", exclusive=exclusive)
    assert flushed == [(path.stat().st_ino, False), (tmp_path.stat().st_ino, True)]


def test_files_open_to_the_group_or_the_world_are_refused(tmp_path: Path):
    path = tmp_path / "address.json"
    Address(DOCUMENT).save(path)
    for loose in (0o640, 0o604, 0o620):
        path.chmod(loose)
        with pytest.raises(UnsafeFile, match="chmod 600"):
            Address.restore(path)


def test_symbolic_links_are_refused(tmp_path: Path):
    real = tmp_path / "real.json"
    Address(DOCUMENT).save(real)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(UnsafeFile, match="symbolic link"):
        Address.restore(link)


def test_exclusive_writes_never_replace_an_existing_file(tmp_path: Path):
    path = tmp_path / "task.json"
    write_durably(path, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        write_durably(path, b"second", exclusive=True)
    assert read_private(path) == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["task.json"]


def test_missing_directories_are_created_owner_only(tmp_path: Path):
    directory = ensure_private_dir(tmp_path / "home" / "tasks")
    assert mode(tmp_path / "home") == 0o700
    assert mode(directory) == 0o700


def test_a_cursor_only_moves_forward_and_starts_at_zero(tmp_path: Path):
    cursor = CursorFile(tmp_path / "feed.cursor")
    assert cursor.read() == 0
    assert cursor.advance(5) == 5
    assert cursor.advance(3) == 5
    assert CursorFile(tmp_path / "feed.cursor").read() == 5
    assert mode(tmp_path / "feed.cursor") == 0o600


def _advance_together(path: Path, sequence: int, barrier: Any) -> None:
    barrier.wait()
    CursorFile(path).advance(sequence)


def test_processes_advancing_one_cursor_at_once_never_put_it_back(tmp_path: Path):
    """`events ack` beside `events follow`: an older sequence written after a newer one re-delivered events."""
    context = multiprocessing.get_context("fork")
    writers = 12
    for round_ in range(5):
        path = tmp_path / f"feed{round_}.cursor"
        barrier = context.Barrier(writers)
        processes = [
            context.Process(target=_advance_together, args=(path, sequence, barrier))
            for sequence in range(1, writers + 1)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=30)
            assert process.exitcode == 0
        assert CursorFile(path).read() == writers


def test_a_cursor_file_that_is_not_a_number_is_refused(tmp_path: Path):
    for saved in (b"\xff\xfe7\n", b"seven\n", b""):
        write_durably(tmp_path / "feed.cursor", saved)
        with pytest.raises(UnsafeFile, match="does not hold a cursor"):
            CursorFile(tmp_path / "feed.cursor").read()


def test_a_file_named_as_long_as_the_file_system_allows_is_written(tmp_path: Path):
    path = tmp_path / ("a" * 255)
    write_durably(path, b"saved")
    assert read_private(path) == b"saved"


def test_the_task_store_keeps_one_address_per_task_under_cairn_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn"))
    store = TaskStore.from_environment()
    path = store.save("nightly build", Address(DOCUMENT))
    assert path.parent == tmp_path / "cairn" / "tasks"
    assert mode(path.parent) == 0o700 and mode(path) == 0o600
    with pytest.raises(FileExistsError):
        store.save("nightly build", Address(DOCUMENT))
    assert store.load("nightly build", http=None).id == "addr_x"
    with pytest.raises(FileNotFoundError):
        store.load("another task", http=None)


def test_a_document_that_is_not_an_address_is_refused():
    with pytest.raises(ValueError, match="read_token"):
        Address({"address": {"id": "addr_x"}, "credentials": {}, "endpoints": {}})
    for document in ([], {"address": []}, {**DOCUMENT, "credentials": {"read_token": 7}}):
        with pytest.raises(ValueError, match="Not a Cairn address"):
            Address(document)
    endpoints = {**DOCUMENT["endpoints"], "viewer_url": None}
    assert Address({**DOCUMENT, "endpoints": endpoints}).id == "addr_x", "an endpoint it does not use may be anything"
