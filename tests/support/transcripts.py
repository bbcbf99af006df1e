"""Small builders for transcripts, plus the deterministic model stand-ins the
history tests use (a word counter and a summariser that never call out)."""

from __future__ import annotations

from cairn.transcript.model import Message, Part, Role, TextPart, ThinkingPart, ToolResultPart, ToolUsePart


def system(text: str) -> Message:
    return Message(role=Role.SYSTEM, parts=[TextPart(text=text)])


def user(text: str) -> Message:
    return Message(role=Role.USER, parts=[TextPart(text=text)])


def assistant(*parts: Part | str) -> Message:
    texts_as_parts = [TextPart(text=part) if isinstance(part, str) else part for part in parts]
    return Message(role=Role.ASSISTANT, parts=texts_as_parts)


def call(call_id: str, name: str = "search", **arguments) -> ToolUsePart:
    return ToolUsePart(id=call_id, name=name, input=dict(arguments))


def results(*call_ids: str) -> Message:
    return Message(role=Role.USER, parts=[ToolResultPart(tool_use_id=call_id, content="ok") for call_id in call_ids])


def thinking(text: str = "let me think") -> ThinkingPart:
    return ThinkingPart(text=text, signature="sig", final=True)


def count_words(messages: list[Message]) -> int:
    """A deterministic token counter: one token per word of text, one per other part."""
    total = 0
    for message in messages:
        for part in message.parts:
            total += len(part.text.split()) if isinstance(part, TextPart) else 1
    return total


class Summariser:
    """Records what it was asked to summarise and says how much that was."""

    def __init__(self, answer: str | None = None) -> None:
        self.answer = answer
        self.calls: list[list[Message]] = []

    def __call__(self, messages: list[Message]) -> str:
        self.calls.append(list(messages))
        return f"summary of {len(messages)} messages" if self.answer is None else self.answer


class CountingCounter:
    """`count_words`, remembering how often it was called."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[Message]) -> int:
        self.calls += 1
        return count_words(messages)
