"""The walk `CairnSaver` gives a `DeltaChannel`: parents found in pages listed newest first."""

from __future__ import annotations

from collections.abc import Iterator

from langgraph.checkpoint.base import CheckpointTuple

from cairn.integrations.langgraph import delta


def checkpoint(checkpoint_id: str, parent: str | None, values: dict | None = None, writes: list | None = None):
    def config(name: str) -> dict:
        return {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": name}}

    return CheckpointTuple(
        config=config(checkpoint_id),
        checkpoint={"channel_values": values or {}},  # type: ignore[typeddict-item]
        metadata={},
        parent_config=config(parent) if parent else None,
        pending_writes=writes or [],
    )


class Namespace:
    """Checkpoints listed as the server lists them, with the pages asked for."""

    def __init__(self, *checkpoints: CheckpointTuple) -> None:
        self.newest_first = sorted(checkpoints, key=lambda found: found.config["configurable"]["checkpoint_id"])[::-1]
        self.pages: list[tuple[str | None, int]] = []

    def listing(self, before: str | None, limit: int) -> Iterator[CheckpointTuple]:
        self.pages.append((before, limit))
        below = [
            found
            for found in self.newest_first
            if before is None or found.config["configurable"]["checkpoint_id"] < before
        ]
        return iter(below[:limit])


def ids(found: list[CheckpointTuple]) -> list[str]:
    return [one.config["configurable"]["checkpoint_id"] for one in found]


def test_the_chain_passes_over_another_branchs_checkpoints_and_grows_its_pages():
    # c00 <- c01 <- ... <- c19, and a branch from c05: d00 <- ... <- d19 (newer ids, listed first).
    line = [checkpoint(f"c{n:02}", f"c{n - 1:02}" if n else None) for n in range(20)]
    branch = [checkpoint(f"d{n:02}", f"d{n - 1:02}" if n else "c05") for n in range(20)]
    namespace = Namespace(*line, *branch)

    found = list(delta.parent_chain(branch[-1], namespace.listing))

    assert ids(found) == [f"d{n:02}" for n in range(18, -1, -1)] + [f"c{n:02}" for n in range(5, -1, -1)]
    assert [limit for _, limit in namespace.pages] == [delta.FIRST_PAGE, delta.FIRST_PAGE * delta.PAGE_GROWTH]


def test_a_parent_no_longer_there_ends_the_chain():
    namespace = Namespace(checkpoint("a", None), checkpoint("c", "b"), checkpoint("d", "c"))

    assert ids(list(delta.parent_chain(checkpoint("e", "d"), namespace.listing))) == ["d", "c"]


def test_histories_gather_each_channels_writes_oldest_first_down_to_its_seed_and_read_no_further():
    ancestors = [
        checkpoint("c3", "c2", writes=[("t3", "a", 3), ("t3", "b", 30)]),
        checkpoint("c2", "c1", values={"b": [0]}, writes=[("t2", "a", 2), ("t2", "b", 20)]),
        checkpoint("c1", "c0", writes=[("t1", "a", 1), ("t1", "b", 10)]),
    ]
    taken: list[str] = []

    def walk() -> Iterator[CheckpointTuple]:
        for ancestor in ancestors:
            taken.append(ancestor.config["configurable"]["checkpoint_id"])
            yield ancestor

    found = delta.histories(["a", "b"], walk())

    assert found["b"] == {"writes": [("t2", "b", 20), ("t3", "b", 30)], "seed": [0]}
    assert found["a"] == {"writes": [("t1", "a", 1), ("t2", "a", 2), ("t3", "a", 3)]}  # no seed: start empty
    assert taken == ["c3", "c2", "c1"]
    taken.clear()
    assert delta.histories(["b"], walk()) == {"b": found["b"]}
    assert taken == ["c3", "c2"]
