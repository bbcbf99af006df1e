"""Adapters for agent frameworks, on the SDK: they talk HTTP to Cairn and never touch its storage."""
