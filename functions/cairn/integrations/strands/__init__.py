"""Strands Agents on Cairn: `CairnSessionManager`, a session that overlapping runs cannot interleave, and
`CairnStorage`, Strands' `Storage` (what its `SnapshotSessionManager` keeps snapshots in).

    from strands import Agent
    from cairn.integrations.strands import CairnSessionManager

    manager = CairnSessionManager.connect(base_url, address_id, read_token, "conversation-1")
    agent = Agent(session_manager=manager)

Needs the `strands` extra: `pip install "cairn-state[strands]"`.
"""

from cairn.integrations.strands.repository import (
    CairnSessionManager,
    CairnSessionRepository,
    SessionConflict,
    StorageLimitExceeded,
)
from cairn.integrations.strands.storage import CairnStorage

__all__ = ["CairnSessionManager", "CairnSessionRepository", "CairnStorage", "SessionConflict", "StorageLimitExceeded"]
