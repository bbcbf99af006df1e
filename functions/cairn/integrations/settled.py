"""A framework's async write, run on a worker thread, whose cancelled caller hears of it once it has settled.

A worker thread cannot be stopped. Were the cancellation raised at once, the
caller would go on (a framework resumes a cancelled run by reading what is
stored) while the write is still on its way to land after that read: the
resumed run's own write would then be refused as a fork of it. So the
cancellation is held until the write answers, then raised, whatever the
write's outcome. The OpenAI Agents SDK publishes this rule for its sessions
(`await_session_mutation`, which `CairnSession` uses); LangGraph's savers and
stores use this one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

_Answer = TypeVar("_Answer")


async def settled(write: Callable[..., _Answer], /, *args: Any, **kwargs: Any) -> _Answer:
    """`write(*args, **kwargs)` on a worker thread; a cancellation meanwhile is raised once it has answered."""
    running = asyncio.ensure_future(asyncio.to_thread(write, *args, **kwargs))
    cancellation: asyncio.CancelledError | None = None
    while not running.done():
        try:
            await asyncio.wait({running})
        except asyncio.CancelledError as error:
            cancellation = cancellation or error
    if cancellation is not None:
        running.exception()  # taken, so that a failed write is not reported as an exception never retrieved
        raise cancellation
    return running.result()
