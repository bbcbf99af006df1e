"""History policies: sliding window and compression, each rule on its own and together.

Tokens are words (`count_words`); summaries come from a recording stand-in.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cairn.transcript.errors import HistoryPolicyError
from cairn.transcript.history import (
    SUMMARY_META,
    CompressAtMaxInputTokens,
    CompressAtTurns,
    HistoryPolicy,
    KeepMaxInputTokens,
    KeepMaxTurns,
    KeepRecentTurns,
    split_turns,
)
from cairn.transcript.model import Message, Role, TextPart
from tests.support.transcripts import (
    CountingCounter,
    Summariser,
    assistant,
    call,
    count_words,
    results,
    system,
    thinking,
    user,
)

SYSTEM = [system("You are terse."), system("Answer in English.")]


def conversation(turns: int, words: int = 1) -> list[Message]:
    """Leading system messages, then `turns` question/answer turns of `words` words each."""
    messages = list(SYSTEM)
    for index in range(turns):
        messages += [user(" ".join([f"q{index}"] * words)), assistant(" ".join([f"a{index}"] * words))]
    return messages


def texts(messages: list[Message]) -> list[str]:
    return [message.parts[0].text for message in messages]


# -- turns -----------------------------------------------------------------------------------


def test_turns_keep_requests_with_responses_and_tool_results_with_their_calls():
    messages = [
        *SYSTEM,
        user("look it up"),
        assistant(thinking(), call("c1"), call("c2")),
        assistant(call("c3")),
        replace(results("c1", "c2", "c3"), parts=[*results("c1", "c2", "c3").parts, TextPart(text="reminder")]),
        user("next question"),
        assistant("next step", call("c4")),
        results("c4"),
        assistant("done"),
        user("thanks"),
        user("and bye"),
        assistant("bye"),
    ]
    lead, turns = split_turns(messages)
    assert lead == SYSTEM
    assert [len(turn) for turn in turns] == [4, 3, 1, 3]
    assert turns[1][0].parts[0].text == "next question"
    assert [message for turn in turns for message in turn] == messages[2:]


def test_an_assistant_message_after_tool_results_is_the_next_plan_step():
    _, turns = split_turns([user("go"), assistant(call("c1")), results("c1"), assistant(call("c2")), results("c2")])
    assert [len(turn) for turn in turns] == [3, 2]


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "error"),
    [
        ((), "compression requires CompressAtTurns or CompressAtMaxInputTokens"),
        ((KeepRecentTurns(0),), "KeepRecentTurns must be a positive integer"),
        ((KeepRecentTurns(3), KeepMaxTurns(1)), "KeepRecentTurns cannot be combined with compression"),
        ((CompressAtTurns(5),), "compression requires KeepMaxTurns or KeepMaxInputTokens"),
        ((KeepMaxTurns(2),), "compression requires CompressAtTurns or CompressAtMaxInputTokens"),
        ((CompressAtTurns(4), KeepMaxTurns(4)), "KeepMaxTurns must be less than CompressAtTurns"),
        ((CompressAtTurns(4), CompressAtTurns(5), KeepMaxTurns(1)), "CompressAtTurns is set twice"),
        ((CompressAtMaxInputTokens(-1), KeepMaxTurns(1)), "CompressAtMaxInputTokens must be a positive integer"),
    ],
)
def test_policies_are_checked_like_the_dsl(rules, error: str):
    with pytest.raises(HistoryPolicyError, match=error):
        HistoryPolicy(*rules)


def test_compression_needs_a_summariser_and_token_rules_need_a_counter():
    with pytest.raises(HistoryPolicyError, match="requires a summariser"):
        HistoryPolicy(CompressAtTurns(3), KeepMaxTurns(1)).apply(conversation(1))
    with pytest.raises(HistoryPolicyError, match="token counter"):
        HistoryPolicy(CompressAtTurns(3), KeepMaxInputTokens(9)).apply(conversation(1), summarize=Summariser())


# -- KeepRecentTurns -------------------------------------------------------------------------


def test_keep_recent_turns_keeps_system_messages_and_whole_newest_turns():
    messages = conversation(5)
    kept = HistoryPolicy(KeepRecentTurns(2)).apply(messages)
    assert texts(kept) == ["You are terse.", "Answer in English.", "q3", "a3", "q4", "a4"]
    assert HistoryPolicy(KeepRecentTurns(9)).apply(messages) == messages
    assert len(messages) == 12  # the input is left alone


def test_keep_recent_turns_never_orphans_a_tool_result():
    messages = [user("go"), assistant(call("c1")), results("c1"), assistant(call("c2")), results("c2")]
    assert HistoryPolicy(KeepRecentTurns(1)).apply(messages) == messages[3:]


# -- CompressAtTurns + KeepMaxTurns ----------------------------------------------------------


def test_compress_at_turns_summarises_older_turns_into_one_message():
    summarise = Summariser()
    policy = HistoryPolicy(CompressAtTurns(4), KeepMaxTurns(2))
    assert policy.apply(conversation(3), summarize=summarise) == conversation(3)
    assert summarise.calls == []
    compressed = policy.apply(conversation(4), summarize=summarise)
    assert compressed[:2] == SYSTEM
    summary = compressed[2]
    assert summary.role == Role.SYSTEM and summary.meta == SUMMARY_META
    assert summary.parts[0].text == "[Conversation Summary]\nsummary of 4 messages"
    assert texts(compressed[3:]) == ["q2", "a2", "q3", "a3"]
    assert texts(summarise.calls[0]) == ["q0", "a0", "q1", "a1"]
    assert len(summarise.calls) == 1


def test_an_empty_summary_is_an_error():
    with pytest.raises(HistoryPolicyError, match="empty summary"):
        HistoryPolicy(CompressAtTurns(2), KeepMaxTurns(1)).apply(conversation(3), summarize=Summariser(" "))


# -- CompressAtMaxInputTokens ----------------------------------------------------------------


def test_the_token_trigger_is_exclusive():
    messages = conversation(4, words=5)  # 6 system tokens + 4 turns of 10
    policy = HistoryPolicy(CompressAtMaxInputTokens(46), KeepMaxTurns(1))
    assert policy.apply(messages, summarize=Summariser(), count_tokens=count_words) == messages
    shorter = HistoryPolicy(CompressAtMaxInputTokens(45), KeepMaxTurns(1)).apply(
        messages, summarize=Summariser(), count_tokens=count_words
    )
    assert texts(shorter[3:]) == ["q3 q3 q3 q3 q3", "a3 a3 a3 a3 a3"]


def test_under_a_ceiling_the_summary_covers_every_older_turn_and_exact_turns_drop_until_it_fits():
    summarise = Summariser()
    messages = conversation(4, words=5)  # 46 tokens: system 6, each turn 10; the summary costs 6
    compressed = HistoryPolicy(CompressAtMaxInputTokens(32), KeepMaxTurns(3)).apply(
        messages, summarize=summarise, count_tokens=count_words
    )
    assert texts(summarise.calls[0]) == texts(messages[2:8])  # all three older turns
    assert texts(compressed[3:]) == texts(messages[6:])  # system 6 + summary 6 + two turns 20 = 32
    assert count_words(compressed) == 32
    assert compressed[:2] == SYSTEM


def test_the_newest_turn_is_mandatory():
    messages = [*SYSTEM, user("short"), assistant("ok"), user("a very long question indeed"), assistant("yes")]
    with pytest.raises(HistoryPolicyError, match=r"newest turn cannot fit within CompressAtMaxInputTokens \(12 > 8"):
        HistoryPolicy(CompressAtMaxInputTokens(8), KeepMaxTurns(1)).apply(
            messages, summarize=Summariser(), count_tokens=count_words
        )
    with pytest.raises(HistoryPolicyError, match=r"summary and the newest turn exceed .* \(18 > 13\)"):
        HistoryPolicy(CompressAtMaxInputTokens(13), KeepMaxTurns(1)).apply(
            messages, summarize=Summariser(), count_tokens=count_words
        )


def test_a_triggered_policy_with_nothing_older_than_the_newest_turn_changes_nothing():
    messages = [*SYSTEM, user("one two three")]
    summarise = Summariser()
    kept = HistoryPolicy(CompressAtTurns(1), KeepMaxInputTokens(5)).apply(
        messages, summarize=summarise, count_tokens=count_words
    )
    assert kept == messages and summarise.calls == []


# -- KeepMaxInputTokens ----------------------------------------------------------------------


def test_keep_max_input_tokens_budgets_the_older_turns_that_join_the_newest():
    messages = conversation(5, words=3)  # each turn 6 tokens
    counter = CountingCounter()
    compressed = HistoryPolicy(CompressAtTurns(5), KeepMaxInputTokens(12)).apply(
        messages, summarize=Summariser(), count_tokens=counter
    )
    # The newest turn plus two older ones (12 tokens); two are summarised.
    assert texts(compressed[3:]) == texts(messages[6:])
    assert compressed[2].parts[0].text.endswith("summary of 4 messages")
    assert counter.calls <= len(split_turns(messages)[1]) + 1


def test_both_retention_budgets_apply():
    messages = conversation(6, words=1)
    turns_first = HistoryPolicy(CompressAtTurns(6), KeepMaxTurns(2), KeepMaxInputTokens(100)).apply(
        messages, summarize=Summariser(), count_tokens=count_words
    )
    tokens_first = HistoryPolicy(CompressAtTurns(6), KeepMaxTurns(5), KeepMaxInputTokens(2)).apply(
        messages, summarize=Summariser(), count_tokens=count_words
    )
    assert texts(turns_first[3:]) == ["q4", "a4", "q5", "a5"]
    assert texts(tokens_first[3:]) == ["q4", "a4", "q5", "a5"]


def test_counter_errors_are_policy_errors_not_fallbacks():
    def broken(_: list[Message]) -> int:
        raise RuntimeError("count_tokens unavailable")

    with pytest.raises(RuntimeError, match="unavailable"):
        HistoryPolicy(CompressAtMaxInputTokens(10), KeepMaxTurns(1)).apply(
            conversation(3), summarize=Summariser(), count_tokens=broken
        )


def test_a_second_application_keeps_the_first_summary_as_system_context():
    policy = HistoryPolicy(CompressAtTurns(3), KeepMaxTurns(1))
    once = policy.apply(conversation(3), summarize=Summariser())
    again = policy.apply(once + [user("q9"), assistant("a9"), user("q10"), assistant("a10")], summarize=Summariser())
    lead, _ = split_turns(again)
    assert lead[:3] == once[:3] and len(lead) == 4
    assert texts(again[4:]) == ["q10", "a10"]
