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
    from cairn.transcript.codec import decode_message as decode_message
    from cairn.transcript.codec import decode_messages as decode_messages
    from cairn.transcript.codec import encode_message as encode_message
    from cairn.transcript.codec import encode_messages as encode_messages
    from cairn.transcript.errors import HistoryPolicyError as HistoryPolicyError
    from cairn.transcript.errors import InvalidHistoryError as InvalidHistoryError
    from cairn.transcript.errors import MemoryRequestError as MemoryRequestError
    from cairn.transcript.errors import MessageFormatError as MessageFormatError
    from cairn.transcript.errors import NoTranscriptError as NoTranscriptError
    from cairn.transcript.errors import TranscriptValidationError as TranscriptValidationError
    from cairn.transcript.history import CompressAtMaxInputTokens as CompressAtMaxInputTokens
    from cairn.transcript.history import CompressAtTurns as CompressAtTurns
    from cairn.transcript.history import HistoryPolicy as HistoryPolicy
    from cairn.transcript.history import KeepMaxInputTokens as KeepMaxInputTokens
    from cairn.transcript.history import KeepMaxTurns as KeepMaxTurns
    from cairn.transcript.history import KeepRecentTurns as KeepRecentTurns
    from cairn.transcript.memory import MemoryEvent as MemoryEvent
    from cairn.transcript.memory import MemoryPage as MemoryPage
    from cairn.transcript.memory import MemorySnapshot as MemorySnapshot
    from cairn.transcript.memory import MemoryStore as MemoryStore
    from cairn.transcript.model import CacheCheckpointPart as CacheCheckpointPart
    from cairn.transcript.model import Citation as Citation
    from cairn.transcript.model import CitationLocation as CitationLocation
    from cairn.transcript.model import CitationsPart as CitationsPart
    from cairn.transcript.model import DocumentPart as DocumentPart
    from cairn.transcript.model import DocumentRange as DocumentRange
    from cairn.transcript.model import ImagePart as ImagePart
    from cairn.transcript.model import Message as Message
    from cairn.transcript.model import Part as Part
    from cairn.transcript.model import Role as Role
    from cairn.transcript.model import TextPart as TextPart
    from cairn.transcript.model import ThinkingPart as ThinkingPart
    from cairn.transcript.model import ToolResultPart as ToolResultPart
    from cairn.transcript.model import ToolUsePart as ToolUsePart
    from cairn.transcript.replay import build_messages_from_run_log as build_messages_from_run_log
    from cairn.transcript.replay import build_messages_from_run_log_prefix as build_messages_from_run_log_prefix
    from cairn.transcript.validation import validate_bedrock as validate_bedrock
    from cairn.transcript.validation import validate_planner_transcript as validate_planner_transcript

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__, __dir__, __all__ = lazy.exports(
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
