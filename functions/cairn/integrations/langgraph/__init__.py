"""LangGraph on Cairn: `CairnSaver`, a checkpointer whose threads refuse stale writers, and `CairnStore`.

    from cairn.client import Address
    from cairn.integrations.langgraph import CairnSaver, CairnStore

    address = Address.restore("address.json")
    graph = builder.compile(checkpointer=CairnSaver(address), store=CairnStore(address))

Needs the `langgraph` extra: `pip install "cairn-state[langgraph]"`.
"""

from cairn.errors import (
    CheckpointPartMissing,
    CheckpointStale,
    CheckpointThreadExists,
    StorageLimitExceeded,
    StoreVersionConflict,
)
from cairn.integrations.langgraph.saver import CairnSaver
from cairn.integrations.langgraph.store import CairnStore

__all__ = [
    "CairnSaver",
    "CairnStore",
    "CheckpointPartMissing",
    "CheckpointStale",
    "CheckpointThreadExists",
    "StorageLimitExceeded",
    "StoreVersionConflict",
]
