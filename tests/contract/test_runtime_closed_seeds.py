"""Closed-request starts keep checking the published initial history.

Cases port goa-ai's `storage/inmem/closed_seed_test.go`; each names its original.
A matching request digest never authorizes missing or different history.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from cairn.runtime.errors import ContractError, RunNotFoundError, SeedNotFoundError, SessionPurgedError
from tests.contract import stored
from tests.contract.builders import (
    T0,
    child_start,
    one_shot_child_start,
    one_shot_start,
    publish_literal,
    root_start,
    terminal,
)
from tests.contract.checks import raises, records_of
from tests.contract.test_runtime_contract import KINDS, moved


def seeded_start(store, kind: str):
    """A run of `kind` whose start attaches a published literal seed; returns (start method, command)."""
    if kind in ("root", "child"):
        store.create_session("session", T0)
    if kind == "root":
        command = root_start()
        return store.start_root_run, replace(command, run=publish_literal(store, command.run))
    if kind == "child":
        store.start_root_run(root_start())
        child = child_start()
        return store.start_child_run, replace(child, run=publish_literal(store, child.run))
    if kind == "one shot":
        solo = one_shot_start()
        return store.start_one_shot_run, replace(solo, run=publish_literal(store, solo.run))
    store.start_one_shot_run(one_shot_start())
    solo_child = one_shot_child_start()
    return store.start_one_shot_child_run, replace(solo_child, run=publish_literal(store, solo_child.run))


@pytest.mark.parametrize("change", ["position", "missing", "unpublished", "owner", "predecessor"])
@pytest.mark.parametrize("kind", KINDS)
def test_closed_request_requires_exact_published_history(store, kind, change):
    """TestClosedRequestRequiresExactPublishedHistory (stored-data changes on the stores a test can reach)"""
    if change != "position" and not stored.reachable(store):
        pytest.skip("the HTTP client cannot reach stored items")
    start, command = seeded_start(store, kind)
    start(command)
    store.record_run_terminal(terminal(command.run))
    run_id = command.run.run_id
    before, meta = records_of(store, run_id), store.load_run(run_id)
    later = moved(command, timedelta(hours=1))
    if change == "position":
        later = replace(later, run=replace(later.run, seed_end_id="99"))
    else:
        stored.corrupt_seed(store, run_id, change)
    raises(ContractError, start, later)
    assert store.load_run(run_id) == meta
    assert records_of(store, run_id) == before


def test_closed_request_cannot_recreate_purged_publication(store):
    """TestClosedRequestCannotRecreatePurgedPublication"""
    start, command = seeded_start(store, "root")
    start(command)
    store.record_run_terminal(terminal(command.run))
    store.end_session("session", T0 + timedelta(seconds=1))
    store.purge_session("session")
    raises(SessionPurgedError, start, moved(command, timedelta(hours=1)))
    raises(RunNotFoundError, store.load_run, command.run.run_id)
    raises(SeedNotFoundError, store.load_run_seed, command.run.run_id, command.run.seed_end_id)
