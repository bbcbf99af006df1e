"""goa-ai's `model.Message`: a role and ordered parts that are never reordered.

Field names are the JSON keys, and fields are declared in the order Go
encodes them, so a message replays byte for byte. `None` and empty differ
where Go distinguishes nil from empty (bytes and lists); numbers inside
`meta`, tool input and tool results are kept exact (see `exactjson`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


@dataclass(frozen=True)
class ThinkingPart:
    """Provider reasoning (signed plaintext or redacted bytes), replayed exactly as issued."""

    kind: ClassVar[str] = "thinking"
    text: str = ""
    signature: str = ""
    redacted: bytes | None = None
    index: int = 0
    final: bool = False


@dataclass(frozen=True)
class TextPart:
    kind: ClassVar[str] = "text"
    text: str = ""


@dataclass(frozen=True)
class ImagePart:
    """An image for multimodal models; needs a format and non-empty bytes."""

    kind: ClassVar[str] = "image"
    format: str = ""
    bytes: bytes | None = None


@dataclass(frozen=True)
class DocumentPart:
    """A document; needs a name and exactly one of bytes, text, chunks or uri."""

    kind: ClassVar[str] = "document"
    name: str = ""
    format: str = ""
    bytes: bytes | None = None
    text: str = ""
    chunks: list[str] | None = None
    uri: str = ""
    context: str = ""
    cite: bool = False


@dataclass(frozen=True)
class DocumentRange:
    """Where cited content sits: a character, chunk or page range of one document."""

    document_index: int = 0
    start: int = 0
    end: int = 0


@dataclass(frozen=True)
class CitationLocation:
    document_char: DocumentRange | None = None
    document_chunk: DocumentRange | None = None
    document_page: DocumentRange | None = None


@dataclass(frozen=True)
class Citation:
    title: str = ""
    source: str = ""
    location: CitationLocation = CitationLocation()
    source_content: list[str] | None = None


@dataclass(frozen=True)
class CitationsPart:
    kind: ClassVar[str] = "citations"
    text: str = ""
    citations: list[Citation] | None = None


@dataclass(frozen=True)
class ToolUsePart:
    """A tool call; `input` is a JSON object kept exactly (key order included),
    and `thought_signature` must go back to the provider unchanged."""

    kind: ClassVar[str] = "tool_use"
    id: str = ""
    name: str = ""
    input: dict[str, Any] | None = None
    thought_signature: str = ""


@dataclass(frozen=True)
class ToolResultPart:
    """The answer to one tool call: a JSON value, or error text with `is_error`."""

    kind: ClassVar[str] = "tool_result"
    tool_use_id: str = ""
    content: Any = None
    is_error: bool = False


@dataclass(frozen=True)
class CacheCheckpointPart:
    """A prompt-cache boundary; provider adapters translate or refuse it."""

    kind: ClassVar[str] = "cache_checkpoint"


Part = (
    ThinkingPart
    | TextPart
    | ImagePart
    | DocumentPart
    | CitationsPart
    | ToolUsePart
    | ToolResultPart
    | CacheCheckpointPart
)

PART_TYPES: dict[str, type[Part]] = {
    kind.kind: kind
    for kind in (
        ThinkingPart,
        TextPart,
        ImagePart,
        DocumentPart,
        CitationsPart,
        ToolUsePart,
        ToolResultPart,
        CacheCheckpointPart,
    )
}


@dataclass(frozen=True)
class Message:
    """One chat message; an empty `parts` list is encoded as `null`, as Go does."""

    role: Role
    parts: list[Part] = field(default_factory=list)
    meta: dict[str, Any] | None = None

    def has_tool_use(self) -> bool:
        return any(isinstance(part, ToolUsePart) for part in self.parts)
