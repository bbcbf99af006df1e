"""What the OpenAI Agents tests run in processes of their own: an agent on a scripted model, and racing workers.

Importable by module name, so `multiprocessing`'s spawn and `python -m` can
start it afresh, as a new Lambda invocation or job would.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from multiprocessing.synchronize import Barrier, Event
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, function_tool, set_tracing_disabled
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from cairn.integrations.openai_agents import CairnSession


def said_message(text: str) -> ResponseOutputMessage:
    """The assistant's message saying `text`, as the Responses API answers it."""
    return ResponseOutputMessage(
        id="msg_scripted",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class EchoingModel(Model):
    """A scripted model, no network: it answers with every user message it was given, in order.

    So an answer shows exactly what history the run handed the model.
    """

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        said = [input] if isinstance(input, str) else [_text(item) for item in input if item.get("role") == "user"]
        return ModelResponse(output=[said_message("heard: " + " | ".join(said))], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")


class StoringModel(EchoingModel):
    """The scripted model answering as the Responses API does when it stores answers: each has an id, which
    is what sets off the SDK's compaction after a run."""

    def __init__(self) -> None:
        self.answered = 0

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        response = await super().get_response(system_instructions, input, *args, **kwargs)
        self.answered += 1
        return ModelResponse(output=response.output, usage=response.usage, response_id=f"resp_{self.answered}")


class ToolCallingModel(Model):
    """A scripted model, no network, that first calls the `tool` tool `calls` times in one answer, then, given
    their outputs, says it is done: one run makes two items a call (the call and its output) beside its
    messages. Each answer has an id, as the Responses API's stored answers do."""

    def __init__(self, calls: int, tool: str = "step") -> None:
        self.calls = calls
        self.tool = tool

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        called = not isinstance(input, str) and any(item.get("type") == "function_call_output" for item in input)
        if called:
            return ModelResponse(
                output=[said_message(f"done {self.calls} steps")], usage=Usage(), response_id="resp_done"
            )
        calls: list[Any] = [
            ResponseFunctionToolCall(
                type="function_call", id=f"fc_{n}", call_id=f"call_{n}", name=self.tool, arguments=json.dumps({"n": n})
            )
            for n in range(self.calls)
        ]
        return ModelResponse(output=calls, usage=Usage(), response_id="resp_calls")

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")


@function_tool
def step(n: int) -> str:
    """Do step `n` of the work."""
    return f"step {n} done"


# What `read_page` answers: a page of text large enough that 70 of them are more than one request to Cairn holds.
PAGE_CHARACTERS = 60_000


@function_tool
def read_page(n: int) -> str:
    """Read page `n` of the document."""
    return f"page {n}: " + "lorem ipsum " * (PAGE_CHARACTERS // 12)


def _text(item: dict[str, Any]) -> str:
    content = item["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def agent() -> Agent[Any]:
    return Agent(name="assistant", instructions="Answer briefly.", model=EchoingModel())


def turn(base_url: str, address_id: str, token: str, session_id: str, message: str) -> str:
    """One `Runner.run` of the agent on the Cairn session; its final output."""
    set_tracing_disabled(True)
    session = CairnSession.connect(base_url, address_id, token, session_id)
    result = asyncio.run(Runner.run(agent(), message, session=session))
    return str(result.final_output)


def churn(
    base_url: str,
    address_id: str,
    token: str,
    session_id: str,
    worker: int,
    rounds: int,
    barrier: Barrier,
    results: Any,
) -> None:
    """Each round: add two items in one call, then pop one; reports what it popped."""
    session = CairnSession.connect(base_url, address_id, token, session_id)

    async def run() -> list[str]:
        popped = []
        for step in range(rounds):
            await session.add_items(
                [
                    {"role": "user", "content": f"{worker}-{step}-a"},
                    {"role": "user", "content": f"{worker}-{step}-b"},
                ]
            )
            item = await session.pop_item()
            if item is not None:
                popped.append(str(item["content"]))
        return popped

    barrier.wait()  # every worker's first add meets the others' on a session none has created
    results.put(asyncio.run(run()))


def add(base_url: str, address_id: str, token: str, session_id: str, items: list[dict[str, Any]]) -> None:
    """One `add_items` from a process of its own, as another worker sharing the session makes it."""
    asyncio.run(CairnSession.connect(base_url, address_id, token, session_id).add_items(items))


def read_while(
    base_url: str,
    address_id: str,
    token: str,
    session_id: str,
    known: dict[str, list[dict[str, Any]]],
    done: Event,
    results: Any,
) -> None:
    """Read the whole session over and over until `done`, then once more; reports how many reads were each of
    the `known` states by name, and how many items each read that was none of them held."""
    seen: dict[str, int] = dict.fromkeys(known, 0)
    others: list[int] = []
    session = CairnSession.connect(base_url, address_id, token, session_id)
    while True:
        finished = done.is_set()
        items = asyncio.run(session.get_items())
        name = next((name for name, state in known.items() if items == state), None)
        if name is None:
            others.append(len(items))
        else:
            seen[name] += 1
        if finished:
            break
    results.put((seen, others))


def main(argv: list[str]) -> None:
    """`turn <base url> <address id> <token> <session id> <message>`: prints the run's final output as JSON."""
    print(json.dumps(turn(*argv[1:6])))


if __name__ == "__main__":
    main(sys.argv[1:])


def read_tool_calls_while(
    base_url: str, address_id: str, token: str, session_id: str, done: Event, results: Any
) -> None:
    """Read the whole session over and over until `done`, then once more; reports how many reads held a tool
    call without its output (or an output without its call), and the most items a read held."""
    unpaired = largest = 0
    session = CairnSession.connect(base_url, address_id, token, session_id)
    while True:
        finished = done.is_set()
        items = asyncio.run(session.get_items())
        calls = {item["call_id"] for item in items if item.get("type") == "function_call"}
        outputs = {item["call_id"] for item in items if item.get("type") == "function_call_output"}
        unpaired += calls != outputs
        largest = max(largest, len(items))
        if finished:
            break
    results.put((unpaired, largest))
