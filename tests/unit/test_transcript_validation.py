"""Planner and Bedrock transcript validators (goa-ai `transcript/validation_test.go`)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.transcript.errors import TranscriptValidationError
from cairn.transcript.model import ImagePart, Message, Role, TextPart, ToolResultPart, ToolUsePart
from cairn.transcript.validation import validate_bedrock, validate_planner_transcript
from tests.support.transcripts import assistant, call, results, thinking, user


def test_a_tool_loop_without_thinking_is_valid():
    validate_planner_transcript([assistant("calling tool", call("tu1")), results("tu1")])


def test_one_result_batch_answers_a_whole_assistant_response():
    validate_planner_transcript([assistant(call("tu1")), assistant(call("tu2", "lookup")), results("tu1", "tu2")])


def test_results_may_come_with_other_user_content_and_validation_goes_on():
    answer = Message(
        role=Role.USER,
        parts=[
            ToolResultPart(tool_use_id="tu1", content="ok"),
            TextPart(text="also"),
            ImagePart(format="png", bytes=b"\x01"),
        ],
    )
    validate_planner_transcript([user("hi"), assistant(call("tu1")), answer, assistant("done"), user("thanks")])
    with pytest.raises(TranscriptValidationError, match=r"messages\[3:4\]"):
        validate_planner_transcript([user("hi"), assistant(call("tu1")), answer, assistant(call("tu2"))])


def test_an_empty_transcript_is_valid():
    validate_planner_transcript([])


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        (
            [assistant(call("tu1"))],
            r"transcript: assistant response messages\[0:1\] with tool_use must be followed by user tool_result",
        ),
        (
            [assistant(call("tu1")), assistant("more")],
            r"messages\[0:2\] with tool_use must be followed by user tool_result",
        ),
        (
            [assistant(call("tu1")), Message(role=Role.SYSTEM, parts=[TextPart(text="x")])],
            r"must be followed by user tool_result",
        ),
        (
            [Message(role=Role.USER, parts=[ToolResultPart(tool_use_id="call-1", content={"ok": True})])],
            r'transcript: message\[0\] role "user" has tool_result without prior assistant tool_use',
        ),
        (
            [assistant(call("tu1"), call("tu2", "lookup")), results("tu1")],
            r"transcript: user message\[1\] must contain exactly 2 tool_result parts for prior assistant tool_use, got 1",
        ),
        (
            [assistant(call("tu1")), Message(role=Role.USER, parts=[ToolResultPart(content="ok")])],
            r"transcript: user message\[1\] tool_result ids must be non-empty and unique",
        ),
        (
            [assistant(call("tu1"), call("tu1", "lookup")), results("tu1")],
            r"transcript: assistant response messages\[0:1\] tool_use ids must be non-empty and unique",
        ),
        (
            [assistant(call("tu1")), user("no results")],
            r"transcript: user message\[1\] must contain tool_result for prior assistant tool_use",
        ),
        (
            [assistant(call("tu1")), results("tu2")],
            r'transcript: user message\[1\] missing tool_result id "tu1" for prior assistant tool_use',
        ),
        (
            [assistant(call("tu1"), call("tu2")), results("tu1", "tu1")],
            r"user message\[1\] tool_result ids must be non-empty and unique",
        ),
        ([user("hi"), None], r"transcript: message\[1\] is nil"),
    ],
    ids=[
        "missing result",
        "no user after group",
        "system after group",
        "orphan result",
        "partial results",
        "empty result id",
        "duplicate use ids",
        "no results",
        "unknown result id",
        "duplicate result ids",
        "nil",
    ],
)
def test_broken_tool_loops_are_refused(messages: list, error: str):
    with pytest.raises(TranscriptValidationError, match=error):
        validate_planner_transcript(messages)


def test_bedrock_with_thinking_wants_tool_use_to_start_with_thinking():
    validate_bedrock([assistant("text", call("tu1"))], thinking_enabled=False)
    validate_bedrock([user("hi"), assistant(thinking(), "text", call("tu1")), results("tu1"), assistant("done")], True)
    with pytest.raises(
        TranscriptValidationError,
        match=r"^bedrock: assistant message\[1\] with tool_use must start with thinking \(parts: \[text, tool_use\]\)$",
    ):
        validate_bedrock([user("hi"), assistant("text", call("tu1"))], thinking_enabled=True)


def test_bedrock_does_not_run_the_planner_checks():
    validate_bedrock([assistant(thinking(), call("tu1"))], thinking_enabled=True)


# -- neither validator changes what it checks ------------------------------------------------

parts = st.one_of(
    st.builds(TextPart, st.text(max_size=4)),
    st.builds(ToolUsePart, st.sampled_from(["a", "b", ""]), st.just("tool"), st.just({"q": [1, {"x": 2}]})),
    st.builds(ToolResultPart, st.sampled_from(["a", "b", ""]), st.just({"rows": [1, 2]})),
    st.just(thinking()),
)
transcripts = st.lists(st.builds(Message, st.sampled_from(Role), st.lists(parts, max_size=3)), max_size=6)


@given(transcripts, st.booleans())
def test_validators_never_change_messages(messages: list[Message], thinking_enabled: bool):
    before = copy.deepcopy(messages)
    identities = [(id(m), id(m.parts), [id(p) for p in m.parts]) for m in messages]
    for validate in (validate_planner_transcript, lambda ms: validate_bedrock(ms, thinking_enabled)):
        try:
            validate(messages)
        except TranscriptValidationError:
            pass
    assert messages == before
    assert [(id(m), id(m.parts), [id(p) for p in m.parts]) for m in messages] == identities
