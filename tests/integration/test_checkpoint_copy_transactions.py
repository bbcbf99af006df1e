"""A thread copy on DynamoDB Local, which enforces a transaction's 4 MB as DynamoDB does (moto does not)."""

from __future__ import annotations

import httpx
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config

from cairn.client import Address, HttpClient
from cairn.integrations.langgraph import CairnSaver
from tests.support.lambda_client import LambdaClient


def test_a_thread_of_checkpoints_with_wide_characters_is_copied_whole(local_api: LambdaClient):
    """Metadata of four-byte characters weighs four times its length in a transaction: a copy that weighed
    characters sent one transaction of about 7.5 MB here, refused on every try."""
    address = Address(local_api.provision(), http=HttpClient(transport=httpx.MockTransport(local_api.handle)))
    cairn = CairnSaver(address)
    metadata = {"summary": "\U0001f600" * 16_000}  # 64,000 bytes as UTF-8, within a checkpoint's metadata
    config = generate_config("source")
    for step in range(98):
        config = cairn.put(config, generate_checkpoint(), {**metadata, "step": step}, {})

    cairn.copy_thread("source", "copy")

    copied = list(cairn.list(generate_config("copy")))
    assert [found.metadata["step"] for found in copied] == list(range(97, -1, -1))
    assert all(found.metadata["summary"] == metadata["summary"] for found in copied)
