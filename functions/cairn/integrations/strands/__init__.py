"""Strands Agents on Cairn: `CairnSessionManager`, a session that overlapping runs cannot interleave.

    from strands import Agent
    from cairn.integrations.strands import CairnSessionManager

    manager = CairnSessionManager.connect(base_url, address_id, read_token, "conversation-1")
    agent = Agent(session_manager=manager)

Needs the `strands` extra: `pip install "cairn-state[strands]"`.
"""

from cairn.integrations.strands.repository import CairnSessionManager, CairnSessionRepository, SessionConflict

__all__ = ["CairnSessionManager", "CairnSessionRepository", "SessionConflict"]
