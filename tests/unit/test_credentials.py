import re

from cairn import credentials


def test_address_ids_are_email_safe_and_unique():
    ids = {credentials.new_address_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"addr_[a-z2-7]{26}", value) for value in ids)


def test_read_token_carries_at_least_256_bits():
    token = credentials.new_read_token()
    # 43 url-safe base64 characters after the prefix encode 32 random bytes.
    assert re.fullmatch(r"crt_[A-Za-z0-9_-]{43}", token)


def test_matches_compares_against_the_digest_only():
    token = credentials.new_read_token()
    stored = credentials.digest(token)
    assert token not in stored
    assert credentials.matches(token, stored)
    assert not credentials.matches(token + "x", stored)
    assert not credentials.matches(token, None)
