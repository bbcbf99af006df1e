"""Transcripts and product memory.

- Transcripts: goa-ai's `model.Message` (`Message`, its `Role` and parts) read
  and written as exact JSON (`decode_messages`, `encode_messages`), rebuilt
  from a run's log in the runtime store (`build_messages_from_run_log`),
  checked (`validate_planner_transcript`, `validate_bedrock`) and cut to fit
  a model's window without splitting a turn (`HistoryPolicy` and its rules).
- Product memory: the product's own typed record of a run (`MemoryStore`,
  `MemoryEvent`), kept apart from the runtime store.

Each module is imported the first time one of its names is asked for, so
importing the package stays cheap and a process loads only what it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn import lazy

if TYPE_CHECKING:
    from cairn.transcript.codec import decode_message, decode_messages, encode_message, encode_messages
    from cairn.transcript.errors import (
        HistoryPolicyError,
        InvalidHistoryError,
        MemoryRequestError,
        MessageFormatError,
        NoTranscriptError,
        TranscriptValidationError,
    )
    from cairn.transcript.history import (
        CompressAtMaxInputTokens,
        CompressAtTurns,
        HistoryPolicy,
        KeepMaxInputTokens,
        KeepMaxTurns,
        KeepRecentTurns,
    )
    from cairn.transcript.memory import MemoryEvent, MemoryPage, MemorySnapshot, MemoryStore
    from cairn.transcript.model import (
        CacheCheckpointPart,
        Citation,
        CitationLocation,
        CitationsPart,
        DocumentPart,
        DocumentRange,
        ImagePart,
        Message,
        Part,
        Role,
        TextPart,
        ThinkingPart,
        ToolResultPart,
        ToolUsePart,
    )
    from cairn.transcript.replay import build_messages_from_run_log, build_messages_from_run_log_prefix
    from cairn.transcript.validation import validate_bedrock, validate_planner_transcript

__all__ = [
    "CacheCheckpointPart",
    "Citation",
    "CitationLocation",
    "CitationsPart",
    "CompressAtMaxInputTokens",
    "CompressAtTurns",
    "DocumentPart",
    "DocumentRange",
    "HistoryPolicy",
    "HistoryPolicyError",
    "ImagePart",
    "InvalidHistoryError",
    "KeepMaxInputTokens",
    "KeepMaxTurns",
    "KeepRecentTurns",
    "MemoryEvent",
    "MemoryPage",
    "MemoryRequestError",
    "MemorySnapshot",
    "MemoryStore",
    "Message",
    "MessageFormatError",
    "NoTranscriptError",
    "Part",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolResultPart",
    "ToolUsePart",
    "TranscriptValidationError",
    "build_messages_from_run_log",
    "build_messages_from_run_log_prefix",
    "decode_message",
    "decode_messages",
    "encode_message",
    "encode_messages",
    "validate_bedrock",
    "validate_planner_transcript",
]

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__, __dir__ = lazy.exports(
        __name__,
        {
            "model": (
                "Message",
                "Role",
                "Part",
                "ThinkingPart",
                "TextPart",
                "ImagePart",
                "DocumentPart",
                "DocumentRange",
                "CitationsPart",
                "Citation",
                "CitationLocation",
                "ToolUsePart",
                "ToolResultPart",
                "CacheCheckpointPart",
            ),
            "codec": ("decode_message", "decode_messages", "encode_message", "encode_messages"),
            "replay": ("build_messages_from_run_log", "build_messages_from_run_log_prefix"),
            "validation": ("validate_planner_transcript", "validate_bedrock"),
            "history": (
                "HistoryPolicy",
                "KeepRecentTurns",
                "KeepMaxTurns",
                "KeepMaxInputTokens",
                "CompressAtTurns",
                "CompressAtMaxInputTokens",
            ),
            "memory": ("MemoryStore", "MemoryEvent", "MemoryPage", "MemorySnapshot"),
            "errors": (
                "MessageFormatError",
                "TranscriptValidationError",
                "NoTranscriptError",
                "HistoryPolicyError",
                "InvalidHistoryError",
                "MemoryRequestError",
            ),
        },
    )
