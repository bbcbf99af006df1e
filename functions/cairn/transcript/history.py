"""History policies: bound what a model is sent without ever splitting a turn.

goa-ai's `History(...)`: either a sliding window (`KeepRecentTurns`) or
compression, where triggers (`CompressAtTurns`, `CompressAtMaxInputTokens`,
ORed) decide when older turns are summarised and retention budgets
(`KeepMaxTurns`, `KeepMaxInputTokens`, both applying when set) decide which
newest turns stay exact.

A turn is a complete exchange: a user request with its first response,
adjacent assistant messages (reasoning, text, parallel tool calls) with the
tool results and reminders that follow them. Leading system messages are no
turn: they are kept exact and in place. The newest turn is always kept; if
it cannot fit, the policy says so instead of sending less. The summariser
and the token counter are the caller's (the history model, the destination
model's counter); their errors are the policy's errors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cairn.transcript.errors import HistoryPolicyError
from cairn.transcript.model import Message, Role, TextPart, ToolResultPart

Summarizer = Callable[[list[Message]], str]
"""Writes the summary of the messages it is given (the older turns)."""

TokenCounter = Callable[[list[Message]], int]
"""The exact input tokens of a request made of these messages (tools included by the counter)."""

SUMMARY_META = {"goa_ai_history": "summary"}
SUMMARY_HEADING = "[Conversation Summary]\n"


@dataclass(frozen=True)
class KeepRecentTurns:
    """Sliding window: only the newest `turns` turns."""

    turns: int


@dataclass(frozen=True)
class CompressAtTurns:
    """Summarise once there are at least `turns` turns."""

    turns: int


@dataclass(frozen=True)
class CompressAtMaxInputTokens:
    """Summarise once the whole request counts more than `tokens` (equal fits); also the ceiling after."""

    tokens: int


@dataclass(frozen=True)
class KeepMaxTurns:
    """Keep at most the newest `turns` turns exact."""

    turns: int


@dataclass(frozen=True)
class KeepMaxInputTokens:
    """Older exact turns may add at most `tokens` to the newest turn's count."""

    tokens: int


Rule = KeepRecentTurns | CompressAtTurns | CompressAtMaxInputTokens | KeepMaxTurns | KeepMaxInputTokens
_TRIGGERS = (CompressAtTurns, CompressAtMaxInputTokens)
_RETENTION = (KeepMaxTurns, KeepMaxInputTokens)


class HistoryPolicy:
    """One agent's `History(...)`, checked as goa-ai's DSL checks it."""

    def __init__(self, *rules: Rule) -> None:
        by_type: dict[type, int] = {}
        for rule in rules:
            name = type(rule).__name__
            if type(rule) in by_type:
                raise HistoryPolicyError(f"history: {name} is set twice")
            value = rule.turns if isinstance(rule, KeepRecentTurns | CompressAtTurns | KeepMaxTurns) else rule.tokens
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise HistoryPolicyError(f"history: {name} must be a positive integer")
            by_type[type(rule)] = value
        self.keep_recent_turns = by_type.get(KeepRecentTurns, 0)
        self.compress_at_turns = by_type.get(CompressAtTurns, 0)
        self.compress_at_tokens = by_type.get(CompressAtMaxInputTokens, 0)
        self.keep_max_turns = by_type.get(KeepMaxTurns, 0)
        self.keep_max_tokens = by_type.get(KeepMaxInputTokens, 0)
        compression = [kind for kind in (*_TRIGGERS, *_RETENTION) if kind in by_type]
        if self.keep_recent_turns:
            if compression:
                raise HistoryPolicyError("history: KeepRecentTurns cannot be combined with compression")
            return
        if not any(kind in by_type for kind in _TRIGGERS):
            raise HistoryPolicyError("history: compression requires CompressAtTurns or CompressAtMaxInputTokens")
        if not any(kind in by_type for kind in _RETENTION):
            raise HistoryPolicyError("history: compression requires KeepMaxTurns or KeepMaxInputTokens")
        if self.compress_at_turns and self.keep_max_turns >= self.compress_at_turns:
            raise HistoryPolicyError("history: KeepMaxTurns must be less than CompressAtTurns")

    @property
    def counts_tokens(self) -> bool:
        return bool(self.compress_at_tokens or self.keep_max_tokens)

    def apply(
        self,
        messages: Sequence[Message],
        *,
        summarize: Summarizer | None = None,
        count_tokens: TokenCounter | None = None,
    ) -> list[Message]:
        """The messages to send: a new list; `messages` is left as it was."""
        system, turns = split_turns(messages)
        if self.keep_recent_turns:
            return system + _flatten(turns[-self.keep_recent_turns :])
        if summarize is None:
            raise HistoryPolicyError("history: compression requires a summariser (the history model)")
        if self.counts_tokens and count_tokens is None:
            raise HistoryPolicyError("history: token budgets require a token counter")
        return _Compression(self, system, turns, summarize, count_tokens or _uncountable).run()


def _uncountable(messages: list[Message]) -> int:
    """The counter of a policy without token budgets, which never asks for one."""
    raise HistoryPolicyError("history: token budgets require a token counter")


class _Compression:
    """One application of a compression policy to one transcript."""

    def __init__(
        self,
        policy: HistoryPolicy,
        system: list[Message],
        turns: list[list[Message]],
        summarize: Summarizer,
        count_tokens: TokenCounter,
    ) -> None:
        self.policy = policy
        self.system = system
        self.turns = turns
        self.summarize = summarize
        self.count_tokens = count_tokens

    def run(self) -> list[Message]:
        policy, turns = self.policy, self.turns
        unchanged = self.system + _flatten(turns)
        if not turns or not self._triggered(unchanged):
            return unchanged
        newest = len(turns) - 1
        ceiling = policy.compress_at_tokens
        newest_tokens = self._count(turns[newest:]) if policy.counts_tokens else 0
        if ceiling and newest_tokens > ceiling:
            raise HistoryPolicyError(
                f"history: the newest turn cannot fit within CompressAtMaxInputTokens ({newest_tokens} > {ceiling}, "
                "system messages included); compression keeps the newest turn whole"
            )
        start = self._exact_tail_start(newest_tokens)
        # Under a ceiling the summary covers every older turn, so dropping
        # exact turns to fit it afterwards loses nothing.
        replaced = turns[:newest] if ceiling else turns[:start]
        if not replaced:
            return unchanged
        summary = _summary(self.summarize(_flatten(replaced)))
        while ceiling and (tokens := self._count(turns[start:], summary)) > ceiling:
            if start == newest:
                raise HistoryPolicyError(
                    f"history: the summary and the newest turn exceed CompressAtMaxInputTokens ({tokens} > {ceiling})"
                )
            start += 1
        return [*self.system, summary, *_flatten(turns[start:])]

    def _triggered(self, messages: list[Message]) -> bool:
        policy = self.policy
        if policy.compress_at_turns and len(self.turns) >= policy.compress_at_turns:
            return True
        return bool(policy.compress_at_tokens) and self.count_tokens(messages) > policy.compress_at_tokens

    def _exact_tail_start(self, newest_tokens: int) -> int:
        """The oldest turn kept exact: the newest always, older ones while both budgets allow."""
        policy, turns = self.policy, self.turns
        start = len(turns) - 1
        for candidate in range(len(turns) - 2, -1, -1):
            if policy.keep_max_turns and len(turns) - candidate > policy.keep_max_turns:
                break
            # Measured against the newest turn, so the fixed system and tool overhead cancels out.
            if policy.keep_max_tokens and self._count(turns[candidate:]) - newest_tokens > policy.keep_max_tokens:
                break
            start = candidate
        return start

    def _count(self, turns: list[list[Message]], summary: Message | None = None) -> int:
        request = [*self.system, *([summary] if summary else []), *_flatten(turns)]
        return self.count_tokens(request)


def split_turns(messages: Sequence[Message]) -> tuple[list[Message], list[list[Message]]]:
    """Leading system messages, then the turns; together they are `messages`, in order."""
    lead = 0
    while lead < len(messages) and messages[lead].role == Role.SYSTEM:
        lead += 1
    turns: list[list[Message]] = []
    answered = False
    previous: Message | None = None
    for message in messages[lead:]:
        if message.role == Role.USER:
            opens = answered and not any(isinstance(part, ToolResultPart) for part in message.parts)
        elif message.role == Role.ASSISTANT:
            # Past the end of a response, an assistant message is the next plan step.
            opens = answered and previous is not None and previous.role != Role.ASSISTANT
        else:
            opens = False
        if opens or not turns:
            turns.append([message])
            answered = False
        else:
            turns[-1].append(message)
        answered = answered or message.role == Role.ASSISTANT
        previous = message
    return list(messages[:lead]), turns


def _flatten(turns: Sequence[list[Message]]) -> list[Message]:
    return [message for turn in turns for message in turn]


def _summary(text: str) -> Message:
    if not isinstance(text, str) or not text.strip():
        raise HistoryPolicyError("history: the summariser returned an empty summary")
    return Message(role=Role.SYSTEM, parts=[TextPart(text=SUMMARY_HEADING + text.strip())], meta=dict(SUMMARY_META))
