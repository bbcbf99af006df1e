"""An answer's bytes sent in chunks while the answer holds one of its client's held reads.

On the edges that send bodies piece by piece (the streaming Lambda loop and
`cairn serve`), sending a large body to a slow reader keeps the execution
busy as long as an event stream would. Such a body gives back what it holds
once its last chunk is drawn or the edge closes it, drawn or not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

# The size of the pieces a body is sent in (the streaming loop cuts a text body the same way).
CHUNK_BYTES = 256 * 1024


class HeldBody(Iterator[bytes]):
    """`data` in chunks of `CHUNK_BYTES`; `release` is called once, at the last chunk or the first close."""

    def __init__(self, data: bytes, *, release: Callable[[], None]) -> None:
        self._data = memoryview(data)
        # Known before the first chunk: an edge that can say it (`cairn serve`) sends it as Content-Length.
        self.size = len(data)
        self._offset = 0
        self._release: Callable[[], None] | None = release

    def __next__(self) -> bytes:
        if self._offset >= len(self._data):
            self.close()
            raise StopIteration
        chunk = bytes(self._data[self._offset : self._offset + CHUNK_BYTES])
        self._offset += len(chunk)
        return chunk

    def close(self) -> None:
        """Give back what the body holds; once, however often the edges close it."""
        release, self._release = self._release, None
        if release is not None:
            release()
