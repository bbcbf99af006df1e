"""The bearer key that guards the runtime and memory routes outside AWS.

Both serve trusted workers, not agents holding an address token. In AWS, API
Gateway authorizes them with IAM; `cairn serve` has no IAM, so it always
sets a key (the one it is given, or one it makes in its data directory) and
every such request must carry it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cairn import credentials
from cairn.api.requests import bearer_token
from cairn.errors import Unauthorized
from cairn.settings import Settings

if TYPE_CHECKING:
    from cairn.api.resolver import ConcurrentRestResolver


def guard(app: ConcurrentRestResolver, settings: Settings) -> Callable[[], None]:
    """A check for the current request: `Unauthorized` unless it carries the key (when one is set)."""
    key_digest = credentials.digest(settings.runtime_key) if settings.runtime_key else None

    def authorize() -> None:
        if key_digest is None:
            return
        token = bearer_token(app.current_event)
        if not token or not credentials.matches(token, key_digest):
            raise Unauthorized("The runtime and memory routes need the runtime key as a bearer token.")

    return authorize
