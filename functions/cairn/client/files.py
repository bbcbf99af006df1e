"""An address's files: bytes under keys, each replaced whole in one write."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from cairn.client.http import HttpClient, json_body
from cairn.client.models import FileListing, FileWritten
from cairn.errors import NotFound


class Files:
    """`addr.files`: write, read, delete and list an address's files (all with the read token).

    A key is any text without control characters, at most 512 bytes as UTF-8;
    `/` only means something to a prefix. A file holds at most 3 MiB, and an
    address's files and sessions at most its storage limit in all
    (`StorageLimitExceeded`, nothing changed).
    """

    def __init__(self, http: HttpClient, address_url: str, read_token: str) -> None:
        self._http = http
        self._url = f"{address_url}/files"
        self._token = read_token

    def write(self, key: str, data: bytes) -> FileWritten:
        """Replace the file under `key` with `data`, whole: a reader gets the old bytes or these."""
        written: FileWritten = self._post("", {"key": key, "data": base64.b64encode(data).decode("ascii")})
        return written

    def read(self, key: str) -> bytes | None:
        """The file's bytes; None when there is none under `key`."""
        try:
            found = self._post("/read", {"key": key})
        except NotFound:
            return None
        return base64.b64decode(found["data"])

    def delete(self, key: str) -> bool:
        """Remove the file; False when there was none."""
        deleted: bool = self._post("/delete", {"key": key})["deleted"]
        return deleted

    def list(self, prefix: str = "", *, after: str | None = None, limit: int | None = None) -> FileListing:
        """One page of the keys that start with `prefix`, ascending, after `after`."""
        request: dict[str, object] = {"prefix": prefix}
        if after is not None:
            request["after"] = after
        if limit is not None:
            request["limit"] = limit
        listing: FileListing = self._post("/list", request)
        return listing

    def keys(self, prefix: str = "", *, page_size: int | None = None) -> Iterator[str]:
        """Every key that starts with `prefix`, ascending, `page_size` a request (the server's most by default)."""
        after = None
        while True:
            page = self.list(prefix, after=after, limit=page_size)
            yield from page["keys"]
            if page["next"] is None:
                return
            after = page["next"]

    def _post(self, path: str, request: dict[str, object]) -> Any:
        """The answer's JSON (every file route is a POST: keys travel in bodies, never in paths)."""
        return self._http.request("POST", self._url + path, token=self._token, body=json_body(request)).json()
