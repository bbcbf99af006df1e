"""What can go wrong with transcripts, each with goa-ai's wording."""

from __future__ import annotations

from cairn.runtime.errors import ContractError, RuntimeStoreError


class MessageFormatError(ValueError):
    """JSON that is not a canonical `model.Message` (or a message that cannot become one)."""


class TranscriptValidationError(ValueError):
    """A transcript that breaks a tool-loop or provider invariant."""


class NoTranscriptError(LookupError):
    """The run log holds no transcript records and no seed."""


class HistoryPolicyError(ValueError):
    """A history policy that cannot be configured, or cannot be honoured for this transcript."""


class MemoryRequestError(ValueError):
    """Ids or events the product memory store refuses; nothing was written."""


class InvalidHistoryError(RuntimeStoreError):
    """goa-ai's `transcript.ErrInvalidHistory`: the saved content is corrupt.

    Broken store pages are not this error: they say nothing about the
    history itself, only about the store that returned them.
    """

    code = "invalid_history"
    message = "invalid saved transcript history"


def invalid_history(cause: BaseException) -> ContractError:
    """A permanent error that names the saved history as the problem, keeping `cause`."""
    error = InvalidHistoryError(f"{InvalidHistoryError.message}: {cause}")
    error.__cause__ = cause
    return ContractError(error)
