"""Raw inbound messages, byte for byte, under the id their receiver gave them.

In AWS, SES's S3 action writes each message to `<bucket>/<prefix><message id>`
before it invokes the ingest function; `cairn serve` keeps them as files. The
ingest, replay and attachment code read through one interface
(`cairn.email.ports.RawMessageStore`) and never know which it is.
Attachments are never copied out: a download re-reads the message.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from botocore.config import Config
from botocore.exceptions import ClientError

from cairn import aws
from cairn.disk import write_durably
from cairn.dynamodb.items import error_code
from cairn.email.ports import MESSAGE_ID_PATTERN, RawMessageStore
from cairn.settings import Settings

if TYPE_CHECKING:
    from types_boto3_s3 import S3Client


class S3RawMessages:
    """Messages in the bucket SES's receipt rule writes to.

    The S3 client is made on first use: making it loads S3's service model
    (about half a second), which a cold start of the API should not pay for
    requests that never touch mail.
    """

    def __init__(self, bucket: str, prefix: str, make_client: Callable[[], S3Client]) -> None:
        self._bucket = bucket
        self._prefix = prefix
        self._make_client = make_client

    @cached_property
    def _client(self) -> S3Client:
        return self._make_client()

    def load(self, message_id: str) -> bytes | None:
        try:
            response = self._client.get_object(Bucket=self._bucket, Key=self._key(message_id))
        except ClientError as error:
            if error_code(error) in ("NoSuchKey", "404"):
                return None
            raise
        return response["Body"].read()

    def save(self, message_id: str, raw: bytes) -> None:
        self._client.put_object(Bucket=self._bucket, Key=self._key(message_id), Body=raw)

    def delete(self, message_id: str) -> None:
        self._client.delete_object(Bucket=self._bucket, Key=self._key(message_id))

    def _key(self, message_id: str) -> str:
        return self._prefix + checked_message_id(message_id)


class FileRawMessages:
    """Messages as files in one folder (`cairn serve`)."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    def load(self, message_id: str) -> bytes | None:
        try:
            return self._path(message_id).read_bytes()
        except FileNotFoundError:
            return None

    def save(self, message_id: str, raw: bytes) -> None:
        self._directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        # A reader never sees half a message, and one whose receipt was answered survives a power cut.
        write_durably(self._path(message_id), raw)

    def delete(self, message_id: str) -> None:
        self._path(message_id).unlink(missing_ok=True)

    def forget_older_than(self, cutoff: float) -> int:
        """Delete the messages stored before `cutoff` (epoch seconds); how many went.

        The folder's form of the bucket's lifecycle rule: mail of addresses
        that expired (never deleted) does not outlive the event retention.
        """
        removed = 0
        for path in self._directory.glob("*"):
            if not MESSAGE_ID_PATTERN.fullmatch(path.name):
                continue  # e.g. a message still being written, under a temporary name
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue  # deleted with its address meanwhile
        return removed

    def _path(self, message_id: str) -> Path:
        return self._directory / checked_message_id(message_id)


def checked_message_id(message_id: str) -> str:
    if not MESSAGE_ID_PATTERN.fullmatch(message_id):
        raise ValueError(f"not a message id: {message_id!r}")
    return message_id


def raw_message_store(settings: Settings) -> RawMessageStore:
    """S3 when a bucket is configured (AWS), else the local folder."""
    if settings.email_bucket is None:
        return FileRawMessages(settings.email_blob_dir)
    config = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=3, read_timeout=20)
    return S3RawMessages(
        settings.email_bucket,
        settings.email_prefix,
        lambda: aws.client("s3", settings.region, config),
    )
