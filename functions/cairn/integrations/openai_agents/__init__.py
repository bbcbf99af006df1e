"""The OpenAI Agents SDK on Cairn: `CairnSession`, a session that processes can share safely.

    from agents import Agent, Runner
    from cairn.integrations.openai_agents import CairnSession

    session = CairnSession.connect(base_url, address_id, read_token, "conversation-1")
    result = await Runner.run(agent, "Hello", session=session)

Needs the `openai-agents` extra: `pip install "cairn-state[openai-agents]"`.
"""

from cairn.integrations.openai_agents.session import CairnSession

__all__ = ["CairnSession"]
