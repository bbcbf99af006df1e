"""LangGraph checkpoints on an address: threads whose every put continues their head, or is refused."""
