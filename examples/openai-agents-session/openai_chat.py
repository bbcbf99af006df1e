"""An OpenAI Agents SDK agent whose conversation lives in a Cairn address: every run goes on from the last.

    python examples/openai-agents-session/openai_chat.py --address chat.json "My name is Ada."
    python examples/openai-agents-session/openai_chat.py --address chat.json "What is my name?"

The first run provisions an address on the Cairn server (`--url`, else
`CAIRN_URL`, else the local one) and saves it to `--address` (owner-only);
later runs, in any process, restore it. Each run is one `Runner.run` with a
`CairnSession` as its session: the SDK reads the conversation from Cairn,
hands it to the model with the new message and stores the turn back. The
run prints the conversation as the session now holds it.

The model is scripted (no network, no API key): it answers with everything
the user has said so far, so its answer shows the history the run handed it.
To use a real model, change the `MODEL =` line.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, TResponseInputItem, set_tracing_disabled
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from cairn.client import Address
from cairn.client.commands import url_option
from cairn.client.examples.common import run_example
from cairn.integrations.openai_agents import CairnSession


class ScriptedModel(Model):
    """A stand-in for a real model: it repeats back what the user said, in order, and calls nothing."""

    async def get_response(
        self, system_instructions: str | None, input: str | list[TResponseInputItem], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        said = [input] if isinstance(input, str) else [text(dict(item)) for item in input if item.get("role") == "user"]
        answer = "(scripted) So far you said: " + " / ".join(said)
        message = ResponseOutputMessage(
            id="msg_scripted",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=answer, annotations=[])],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream; Runner.run does not ask it to")


# The one line to change for a real model: a model name, e.g. MODEL = "gpt-4.1-mini", with OPENAI_API_KEY set.
MODEL: Model | str = ScriptedModel()


def text(item: dict[str, Any]) -> str:
    """What an input item says: a message's text, or its type for anything else (a tool call, say)."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return f"[{item.get('type', 'item')}]"


def open_address(url: str, path: str) -> Address:
    """The address saved at `path`, or a new one on `url`, saved there for the next run."""
    if Path(path).exists():
        return Address.restore(path)
    address = Address.provision(url, task_id="openai-agents-session-example", expires_in=30 * 24 * 3600)
    address.save(path)
    return address


async def chat(url: str, path: str, session_id: str, message: str) -> list[str]:
    session = CairnSession(open_address(url, path), session_id)
    agent = Agent(name="assistant", instructions="Answer briefly.", model=MODEL)
    await Runner.run(agent, message, session=session)
    return [f"{item.get('role', 'item')}: {text(dict(item))}" for item in await session.get_items()]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, parents=[url_option()]
    )
    parser.add_argument("--address", required=True, help="the address file: read if there, else created (owner-only)")
    parser.add_argument("--session", default="conversation-1", help="the session id (default: conversation-1)")
    parser.add_argument("message", help="what the user says this turn")
    args = parser.parse_args()
    # The SDK sends traces to OpenAI, which takes the API key: without one there is nowhere to send them.
    set_tracing_disabled(not os.environ.get("OPENAI_API_KEY"))
    conversation = asyncio.run(chat(args.url, args.address, args.session, args.message))
    print(f"session {args.session!r}, {len(conversation)} items:")
    for line in conversation:
        print(f"  {line}")


if __name__ == "__main__":
    run_example(main)
