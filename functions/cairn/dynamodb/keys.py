"""Key schema of the single table. Nothing else formats `pk`/`sk` values.

Sequences are zero-padded so that string order equals numeric order.
"""

from __future__ import annotations

SEQ_WIDTH = 12

META = "META"
STATE = "STATE"


def address_pk(address_id: str) -> str:
    return f"A#{address_id}"


def event_sk(sequence: int) -> str:
    return f"E#{sequence:0{SEQ_WIDTH}d}"


def events_upper_bound() -> str:
    """An `sk` above every event of an address (for range queries)."""
    return "E#~"


def chunk_sk(sequence: int, index: int) -> str:
    """Pieces of an event payload too large for one item."""
    return f"C#{sequence:0{SEQ_WIDTH}d}#{index:03d}"


def state_key_sk(state_key: str) -> str:
    """One item per state key; `STATE` (the usage counters) shares the `S` prefix."""
    return f"S#{state_key}"


STATE_PREFIX = "S"


def idempotency_sk(key_digest: str) -> str:
    return f"I#{key_digest}"


def memory_pk(agent_id: str, run_id: str) -> str:
    """Product memory of one agent run (ids never contain `#`); events use `event_sk`."""
    return f"M#{agent_id}#{run_id}"


def memory_chunk_sk(sequence: int, index: int) -> str:
    """A piece of a large memory event, sorted right after the event itself."""
    return f"{event_sk(sequence)}#{index:03d}"


def rate_pk(scope: str, subject: str) -> str:
    """Fixed-window counters, e.g. creations per client IP."""
    return f"RL#{scope}#{subject}"


def rate_sk(window: int) -> str:
    return f"W#{window}"
