"""What the Strands tests run in processes of their own: an agent on a scripted model, and overlapping runs.

Importable by module name, so `multiprocessing`'s spawn and `python -m` can
start it afresh, as a new Lambda invocation or queue redelivery would.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncGenerator, Callable
from multiprocessing.synchronize import Barrier, Event
from typing import Any, TypeVar

from pydantic import BaseModel
from strands import Agent
from strands.models import Model
from strands.session import SnapshotSessionManager
from strands.types.content import Messages

from cairn.integrations.strands import CairnSessionManager, CairnStorage, SessionConflict

T = TypeVar("T", bound=BaseModel)


class EchoingModel(Model):
    """A scripted model, no network: it answers with every user text it was given, in order.

    So an answer shows exactly what history the run handed the model. It
    streams Strands' own events, as the SDK's tests' mocked provider does.
    `before_answer` runs when it is called, after the run stored the prompt.
    """

    def __init__(self, before_answer: Callable[[], None] | None = None) -> None:
        self.before_answer = before_answer

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(
        self, output_model: type[T], prompt: Messages, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        raise NotImplementedError("the scripted model gives no structured output")

    async def stream(self, messages: Messages, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        if self.before_answer is not None:
            self.before_answer()
        said = [
            block["text"]
            for message in messages
            if message["role"] == "user"
            for block in message["content"]
            if "text" in block
        ]
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockStart": {"start": {}}}
        yield {"contentBlockDelta": {"delta": {"text": "heard: " + " | ".join(said)}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


def agent(base_url: str, address_id: str, token: str, session_id: str, model: Model | None = None) -> Agent:
    manager = CairnSessionManager.connect(base_url, address_id, token, session_id)
    return Agent(model=model or EchoingModel(), session_manager=manager, callback_handler=None)


def turn(base_url: str, address_id: str, token: str, session_id: str, message: str) -> dict[str, Any]:
    """One invocation of the agent on the Cairn session: its answer, or why it was refused."""
    try:
        return {"answer": str(agent(base_url, address_id, token, session_id)(message)).strip()}
    except SessionConflict as refused:
        return {"refused": refused.details["reason"]}


def held_turn(
    base_url: str,
    address_id: str,
    token: str,
    session_id: str,
    message: str,
    entered: Event,
    proceed: Event,
    results: Any,
) -> None:
    """A run that, once it stored its prompt and called the model, waits for `proceed` before answering."""

    def hold() -> None:
        entered.set()
        proceed.wait(timeout=120)

    answer = agent(base_url, address_id, token, session_id, EchoingModel(hold))(message)
    results.put({"answer": str(answer).strip()})


def racing_turn(
    base_url: str, address_id: str, token: str, session_id: str, message: str, barrier: Barrier, results: Any
) -> None:
    """A run that loads the session, waits until the other run loaded it too, then goes.

    A refusal while loading (first runs create the session and its agent) is this run's outcome too.
    """
    outcome: dict[str, Any] = {"message": message}
    try:
        loaded = agent(base_url, address_id, token, session_id)
    except SessionConflict as refused:
        loaded, outcome["refused"] = None, refused.details["reason"]
    barrier.wait(timeout=120)
    if loaded is not None:
        try:
            outcome["answer"] = str(loaded(message)).strip()
        except SessionConflict as refused:
            outcome["refused"] = refused.details["reason"]
    results.put(outcome)


def snapshot_agent(base_url: str, address_id: str, token: str, session_id: str) -> Agent:
    """An agent on Strands' own snapshot session manager, its snapshots in the address's files.

    Every invocation also keeps an immutable snapshot, so a run can go back to any earlier one.
    """
    manager = SnapshotSessionManager(
        session_id=session_id,
        storage=CairnStorage.connect(base_url, address_id, token),
        snapshot_trigger=lambda **_: True,
    )
    return Agent(model=EchoingModel(), session_manager=manager, callback_handler=None)


def snapshot_turn(base_url: str, address_id: str, token: str, session_id: str, message: str) -> dict[str, Any]:
    return {"answer": str(snapshot_agent(base_url, address_id, token, session_id)(message)).strip()}


def file_writer(
    base_url: str, address_id: str, token: str, key: str, ready: Barrier, payloads: list[tuple[int, int]]
) -> None:
    """Once every reader and writer is `ready`, writes `bytes([fill]) * size` under `key` for each
    `(fill, size)`, in order."""
    storage = CairnStorage.connect(base_url, address_id, token)
    ready.wait(timeout=120)
    for fill, size in payloads:
        asyncio.run(storage.write(key, bytes([fill]) * size))


def file_reader(
    base_url: str, address_id: str, token: str, key: str, ready: Barrier, stop: Event, results: Any
) -> None:
    """Once every reader and writer is `ready`, reads `key` until `stop`, then once more; puts each read's
    (first byte, size, whether all bytes match)."""
    storage = CairnStorage.connect(base_url, address_id, token)
    ready.wait(timeout=120)
    seen: list[tuple[int, int, bool] | None] = []
    while True:
        last = stop.is_set()
        data = asyncio.run(storage.read(key))
        seen.append(None if data is None else (data[0], len(data), data == data[:1] * len(data)))
        if last:
            break
    results.put(seen)


COMMANDS: dict[str, Callable[..., dict[str, Any]]] = {"turn": turn, "snapshot-turn": snapshot_turn}


def main(argv: list[str]) -> None:
    """`turn|snapshot-turn <base url> <address id> <token> <session id> <message>`: prints the outcome as JSON."""
    print(json.dumps(COMMANDS[argv[0]](*argv[1:6])))


if __name__ == "__main__":
    main(sys.argv[1:])
