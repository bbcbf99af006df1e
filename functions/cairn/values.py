"""Value objects on the paths a Lambda container loads at its start.

They are `msgspec.Struct`s rather than dataclasses: a dataclass compiles
its generated methods from source when its module is imported (about half
a millisecond each on CPython 3.11, paid again by every new container),
while a Struct's are made in C. `replace` and `asdict` are msgspec's, and
a Struct's `__post_init__` runs on `replace` too, as a dataclass's does.
"""

from __future__ import annotations

import msgspec


def repr_without(value: msgspec.Struct, *hidden: str) -> str:
    """`value`'s repr with the fields `hidden` left out: secrets must not reach a log line or a traceback."""
    shown = ", ".join(f"{name}={getattr(value, name)!r}" for name in value.__struct_fields__ if name not in hidden)
    return f"{type(value).__name__}({shown})"
