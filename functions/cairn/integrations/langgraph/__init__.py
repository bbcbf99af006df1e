"""LangGraph on Cairn: `CairnSaver`, a checkpointer whose threads refuse stale writers.

    from cairn.client import Address
    from cairn.integrations.langgraph import CairnSaver, CheckpointStale

    graph = builder.compile(checkpointer=CairnSaver(Address.restore("address.json")))

Needs the `langgraph` extra: `pip install "cairn-state[langgraph]"`.
"""

from cairn.errors import CheckpointPartMissing, CheckpointStale
from cairn.integrations.langgraph.saver import CairnSaver

__all__ = ["CairnSaver", "CheckpointPartMissing", "CheckpointStale"]
