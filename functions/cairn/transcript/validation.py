"""Transcript invariants checked before a model call, with goa-ai's error texts.

Both validators only read: the transcript a caller validates is the one it
sends.
"""

from __future__ import annotations

from collections.abc import Sequence

from cairn.transcript.errors import TranscriptValidationError
from cairn.transcript.model import Message, Part, Role, ThinkingPart, ToolResultPart, ToolUsePart


def validate_planner_transcript(messages: Sequence[Message | None]) -> None:
    """The tool-loop invariant the runtime needs before it plans again.

    Consecutive assistant messages form one response; if it uses tools, the
    very next message is one user message with exactly one `tool_result` per
    `tool_use` id. Other parts may accompany the results, and no `tool_result`
    may appear anywhere else.
    """
    index = 0
    while index < len(messages):
        message = _present(messages, index)
        if message.role != Role.ASSISTANT:
            if any(isinstance(part, ToolResultPart) for part in message.parts):
                raise TranscriptValidationError(
                    f'transcript: message[{index}] role "{message.role}" has tool_result '
                    "without prior assistant tool_use"
                )
            index += 1
            continue
        end = index
        group: list[Part] = []
        while end < len(messages) and (candidate := messages[end]) is not None and candidate.role == Role.ASSISTANT:
            group.extend(candidate.parts)
            end += 1
        uses = [part.id for part in group if isinstance(part, ToolUsePart)]
        if not uses:
            index = end
            continue
        follower = messages[end] if end < len(messages) else None
        if follower is None or follower.role != Role.USER:
            raise TranscriptValidationError(
                f"transcript: assistant response messages[{index}:{end}] with tool_use "
                "must be followed by user tool_result"
            )
        use_ids = _distinct_ids(uses)
        if use_ids is None:
            raise TranscriptValidationError(
                f"transcript: assistant response messages[{index}:{end}] tool_use ids must be non-empty and unique"
            )
        _check_results(follower, end, use_ids)
        index = end + 1


def _check_results(message: Message, index: int, use_ids: list[str]) -> None:
    results = [part.tool_use_id for part in message.parts if isinstance(part, ToolResultPart)]
    if not results:
        raise TranscriptValidationError(
            f"transcript: user message[{index}] must contain tool_result for prior assistant tool_use"
        )
    if len(results) != len(use_ids):
        raise TranscriptValidationError(
            f"transcript: user message[{index}] must contain exactly {len(use_ids)} tool_result parts for prior "
            f"assistant tool_use, got {len(results)}"
        )
    result_ids = _distinct_ids(results)
    if result_ids is None:
        raise TranscriptValidationError(
            f"transcript: user message[{index}] tool_result ids must be non-empty and unique"
        )
    for use_id in use_ids:
        if use_id not in result_ids:
            raise TranscriptValidationError(
                f'transcript: user message[{index}] missing tool_result id "{use_id}" for prior assistant tool_use'
            )
    for result_id in result_ids:
        if result_id not in use_ids:
            raise TranscriptValidationError(
                f'transcript: user message[{index}] tool_result id "{result_id}" '
                "does not match prior assistant tool_use id"
            )


def validate_bedrock(messages: Sequence[Message | None], thinking_enabled: bool) -> None:
    """Bedrock with thinking enabled: a tool-using assistant message starts with thinking.

    It does not run `validate_planner_transcript` first; callers own that.
    """
    if not thinking_enabled:
        return
    for index, message in enumerate(messages):
        if message is None or message.role != Role.ASSISTANT or not message.has_tool_use():
            continue
        if not isinstance(message.parts[0], ThinkingPart):
            names = ", ".join(part.kind for part in message.parts)
            raise TranscriptValidationError(
                f"bedrock: assistant message[{index}] with tool_use must start with thinking (parts: [{names}])"
            )


def _present(messages: Sequence[Message | None], index: int) -> Message:
    message = messages[index]
    if message is None:
        raise TranscriptValidationError(f"transcript: message[{index}] is nil")
    return message


def _distinct_ids(ids: list[str]) -> list[str] | None:
    """The ids in order when all are non-empty and unique; None otherwise."""
    return ids if all(ids) and len(set(ids)) == len(ids) else None
