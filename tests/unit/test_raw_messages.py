"""One contract for every raw message store: S3 (moto) and a local folder."""

from __future__ import annotations

import os
import time
from pathlib import Path

import boto3
import pytest

from cairn.dynamodb.raw_messages import FileRawMessages, S3RawMessages, raw_message_store
from cairn.email.ports import RawMessageStore
from cairn.local.mail_expiry import StoredMailExpiry
from cairn.settings import Settings

DAY = 86_400
MESSAGE = b"From: a@example.com\r\nSubject: \xe9t\xe9\r\n\r\n\x00binary\xff\r\n"


@pytest.fixture(params=["s3", "folder"])
def store(request, tmp_path: Path) -> RawMessageStore:
    if request.param == "folder":
        return FileRawMessages(tmp_path / "email")
    request.getfixturevalue("moto_env")
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="mail")
    return raw_message_store(Settings(email_bucket="mail", email_prefix="inbound/"))


def test_a_saved_message_loads_byte_for_byte(store: RawMessageStore):
    store.save("0q9s8r7p6o5n4m3l2k1j", MESSAGE)
    assert store.load("0q9s8r7p6o5n4m3l2k1j") == MESSAGE


def test_a_missing_message_is_none(store: RawMessageStore):
    assert store.load("never-stored") is None


def test_a_deleted_message_is_gone_and_deleting_again_is_harmless(store: RawMessageStore):
    store.save("0q9s8r7p6o5n4m3l2k1j", MESSAGE)
    store.delete("0q9s8r7p6o5n4m3l2k1j")
    assert store.load("0q9s8r7p6o5n4m3l2k1j") is None
    store.delete("0q9s8r7p6o5n4m3l2k1j")


@pytest.mark.parametrize("message_id", ["../outside", "a/b", "", "x" * 201, "dots.are.not.ids"])
def test_ids_that_could_escape_the_store_are_refused(store: RawMessageStore, message_id: str):
    with pytest.raises(ValueError):
        store.save(message_id, MESSAGE)
    with pytest.raises(ValueError):
        store.load(message_id)


def test_s3_keys_are_prefixed_as_the_receipt_rule_writes_them(moto_env):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="mail")
    s3.put_object(Bucket="mail", Key="inbound/ses-message-1", Body=MESSAGE)
    assert S3RawMessages("mail", "inbound/", lambda: s3).load("ses-message-1") == MESSAGE


def test_without_a_bucket_messages_live_in_the_blob_folder(tmp_path: Path):
    store = raw_message_store(Settings(email_blob_dir=tmp_path / "blobs"))
    store.save("local-1", MESSAGE)
    assert (tmp_path / "blobs" / "local-1").read_bytes() == MESSAGE


def test_the_local_folder_forgets_mail_older_than_the_retention(tmp_path: Path):
    """What the bucket's lifecycle rule does in AWS: an expired address's mail does not stay forever."""
    store = FileRawMessages(tmp_path / "email")
    store.save("old-message", MESSAGE)
    store.save("new-message", MESSAGE)
    (tmp_path / "email" / ".incoming-partial").write_bytes(b"being written")
    now = 2_000_000_000.0
    os.utime(tmp_path / "email" / "old-message", (now - 31 * DAY, now - 31 * DAY))
    os.utime(tmp_path / "email" / "new-message", (now - 29 * DAY, now - 29 * DAY))
    expiry = StoredMailExpiry(store, 30 * 86_400, clock=lambda: now)
    assert expiry.expire_now() == 1
    assert store.load("old-message") is None
    assert store.load("new-message") == MESSAGE
    assert (tmp_path / "email" / ".incoming-partial").exists()


def test_cairn_serve_expires_stored_mail_when_it_starts(tmp_path: Path):
    store = FileRawMessages(tmp_path / "email")
    store.save("old-message", MESSAGE)
    os.utime(tmp_path / "email" / "old-message", (0, 0))
    with StoredMailExpiry(store, 86_400, interval_seconds=3600):
        deadline = time.monotonic() + 5
        while store.load("old-message") is not None and time.monotonic() < deadline:
            time.sleep(0.01)
    assert store.load("old-message") is None
