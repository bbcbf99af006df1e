"""A Strands agent whose conversation lives in a Cairn address: every run goes on from the last, one run at a time.

    python examples/strands-session/strands_chat.py --address chat.json "My name is Ada."
    python examples/strands-session/strands_chat.py --address chat.json "What is my name?"
    python examples/strands-session/strands_chat.py --address chat.json --pause "Slowly, please."
    python examples/strands-session/strands_chat.py --address chat.json "Me too!"  # meanwhile: refused, exits 3

The first run provisions an address on the Cairn server (`--url`, else
`CAIRN_URL`, else the local one) and saves it to `--address` (owner-only);
later runs, in any process, restore it. Each run is one invocation of an
`Agent(session_manager=CairnSessionManager(...))`: Strands restores the
conversation from Cairn, and the manager stores each message as the run
makes it. The run prints the conversation as the agent now holds it.

A run that overlaps another on the same session is refused with
`SessionConflict` and stores nothing: it prints why on stderr and exits 3,
as `cairn` exits when a compare-and-set lost. `--pause` makes the model wait
for Enter before it answers, as a slow model call would, so a second run
can be started meanwhile.

The model is scripted (no network, no credentials): it answers with
everything the user has said so far, so its answer shows the history the
run handed it. To use a real model, change the one line in `model()`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from strands import Agent
from strands.models import Model
from strands.types.content import Messages

from cairn.client import Address
from cairn.client.commands import EXIT_CONFLICT, url_option
from cairn.client.examples.common import run_example
from cairn.integrations.strands import CairnSessionManager, SessionConflict

T = TypeVar("T", bound=BaseModel)


class ScriptedModel(Model):
    """A stand-in for a real model: it repeats back what the user said, in order, and calls nothing.

    It streams Strands' own events, as a model provider does. With `pause`, it
    waits for a line on stdin before answering, after the run stored the prompt.
    """

    def __init__(self, pause: bool = False) -> None:
        self.pause = pause

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(
        self, output_model: type[T], prompt: Messages, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        raise NotImplementedError("the scripted model gives no structured output")

    async def stream(self, messages: Messages, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        if self.pause:
            print("The model is thinking: press Enter to let it answer. Meanwhile, run again to see it refused.")
            sys.stdout.flush()
            await asyncio.to_thread(sys.stdin.readline)
        said = [
            block["text"]
            for message in messages
            if message["role"] == "user"
            for block in message["content"]
            if "text" in block  # a tool's result, say, is not something the user said
        ]
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockStart": {"start": {}}}
        yield {"contentBlockDelta": {"delta": {"text": "(scripted) So far you said: " + " / ".join(said)}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


def model(pause: bool) -> Model | str:
    # The one line to change for a real model: return a Bedrock model id (Strands' default provider, with AWS
    # credentials) or another Strands `Model`.
    return ScriptedModel(pause)


def open_address(url: str, path: str) -> Address:
    """The address saved at `path`, or a new one on `url`, saved there for the next run."""
    if Path(path).exists():
        return Address.restore(path)
    address = Address.provision(url, task_id="strands-session-example", expires_in=30 * 24 * 3600)
    address.save(path)
    return address


def chat(url: str, path: str, session_id: str, message: str, pause: bool) -> list[str]:
    manager = CairnSessionManager(session_id, open_address(url, path))
    # No callback handler: Strands would print the answer as it streams, and the run prints the conversation.
    agent = Agent(model=model(pause), session_manager=manager, callback_handler=None)
    agent(message)
    return [
        f"{turn['role']}: " + "".join(block.get("text", f"[{next(iter(block), 'block')}]") for block in turn["content"])
        for turn in agent.messages
    ]


def refusal(session_id: str, conflict: SessionConflict) -> str:
    """What a person should know of a refused run: why, that nothing of it was kept, and what to do."""
    reason = conflict.details.get("reason")
    if reason == "held":
        held_until = conflict.details.get("held_until")
        until = (
            f", holding it until {time.strftime('%H:%M:%S UTC', time.gmtime(held_until))} at most" if held_until else ""
        )
        why = f"another run of session {session_id!r} is in progress{until}"
        then = "run this again when it has finished"
    elif reason == "moved":
        why = f"another run wrote session {session_id!r} after this run loaded it"
        then = "run this again to go on from the latest turn"
    else:
        why = f"another run started session {session_id!r} at the same moment"
        then = "run this again"
    return f"Refused: {why}. Nothing of this run was stored; {then}."


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, parents=[url_option()]
    )
    parser.add_argument("--address", required=True, help="the address file: read if there, else created (owner-only)")
    parser.add_argument("--session", default="conversation-1", help="the session id (default: conversation-1)")
    parser.add_argument("--pause", action="store_true", help="the model waits for Enter before it answers")
    parser.add_argument("message", help="what the user says this turn")
    args = parser.parse_args()
    try:
        conversation = chat(args.url, args.address, args.session, args.message, args.pause)
    except SessionConflict as conflict:
        print(refusal(args.session, conflict), file=sys.stderr)
        sys.exit(EXIT_CONFLICT)
    print(f"session {args.session!r}, {len(conversation)} messages:")
    for line in conversation:
        print(f"  {line}")


if __name__ == "__main__":
    run_example(main)
