"""The cyclic garbage collector while a new container starts.

A Lambda container's init imports modules and builds the services: objects
that live as long as the container. Collections during init walk them again
and again and find next to nothing (about a tenth of the API's import time).
So init runs with the collector paused; at its end every object made so far
is frozen out of later collections (`gc.freeze`), which then walk only what
the requests make.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def container_init() -> Iterator[None]:
    """Pause collection for the block (the module's imports and services), then freeze what it made."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
