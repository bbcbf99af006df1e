"""The key and the secret `cairn serve` keeps in its data directory: one per directory, whole, owner-only."""

from __future__ import annotations

import multiprocessing
import stat
from pathlib import Path
from typing import Any

from cairn.local.runtime_key_file import load_or_create

STARTS = 8
ROUNDS = 20


def _start(path: Path, barrier: Any, answers: Any) -> None:
    barrier.wait()
    answers.put(load_or_create(path))


def test_servers_starting_at_once_on_one_data_directory_all_use_the_key_it_keeps(tmp_path: Path):
    """A second server reading the file while the first wrote it found it empty and made a key of its own."""
    context = multiprocessing.get_context("fork")
    for round_ in range(ROUNDS):
        path = tmp_path / f"data{round_}" / "runtime-key"
        barrier, answers = context.Barrier(STARTS), context.Queue()
        starts = [context.Process(target=_start, args=(path, barrier, answers)) for _ in range(STARTS)]
        for start in starts:
            start.start()
        keys = [answers.get(timeout=30) for _ in starts]
        for start in starts:
            start.join(timeout=30)
        assert [start.exitcode for start in starts] == [0] * STARTS
        assert set(keys) == {path.read_text().strip()}
        assert [entry.name for entry in path.parent.iterdir()] == ["runtime-key"]


def test_a_kept_key_is_used_again_and_made_owner_only(tmp_path: Path):
    path = tmp_path / "runtime-key"
    key = load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    assert load_or_create(path) == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_empty_file_is_replaced_by_a_key(tmp_path: Path):
    path = tmp_path / "runtime-key"
    path.touch()
    key = load_or_create(path)
    assert len(key) >= 40
    assert path.read_text() == key + "\n"
    assert load_or_create(path) == key
