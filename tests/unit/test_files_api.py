"""The file routes through the API handler on moto: what `CairnStorage` calls."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from cairn import errors
from cairn.client import Address, HttpClient
from cairn.dynamodb import keys, table_ops
from cairn.dynamodb.client import make_client
from cairn.files import files, ports
from cairn.integrations.strands import storage
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient


@pytest.fixture
def api(moto_env: None, clock: FakeClock) -> LambdaClient:
    return LambdaClient.on_moto(clock)


@pytest.fixture
def address(api: LambdaClient) -> dict[str, Any]:
    return api.provision()


def call(api: LambdaClient, address: dict[str, Any], path: str, body: dict[str, Any], token: str | None = "") -> Any:
    url = f"/api/v1/addresses/{address['address']['id']}/files{path}"
    return api.request(
        "POST", url, json_body=body, token=address["credentials"]["read_token"] if token == "" else token
    )


def write(api: LambdaClient, address: dict[str, Any], key: str, data: bytes) -> None:
    reply = call(api, address, "", {"key": key, "data": base64.b64encode(data).decode()})
    assert (reply.status, reply.json()) == (201, {"key": key, "size": len(data)}), reply.text


def read(api: LambdaClient, address: dict[str, Any], key: str) -> bytes | None:
    reply = call(api, address, "/read", {"key": key})
    if reply.status == 404:
        assert reply.error_code == "not_found"
        return None
    assert reply.status == 200, reply.text
    return base64.b64decode(reply.json()["data"])


def listed(api: LambdaClient, address: dict[str, Any], prefix: str = "", **page: Any) -> dict[str, Any]:
    reply = call(api, address, "/list", {"prefix": prefix, **page})
    assert reply.status == 200, reply.text
    return reply.json()


def pieces_stored(api: LambdaClient, address: dict[str, Any], key: str) -> int:
    """The piece items in the table under the file: what storage it still takes."""
    settings = api.services.settings
    prefix = keys.payload_chunk_prefix(keys.file_sk(key))
    pk = keys.address_pk(address["address"]["id"])
    return sum(1 for _ in table_ops.query_prefix(make_client(settings), settings.table_name, pk, prefix))


def test_the_strands_storage_sends_within_the_servers_limits():
    assert storage.MAX_FILE_BYTES == files.MAX_FILE_BYTES


def test_the_sdks_files_client_round_trips_lists_every_page_and_raises_the_servers_refusals(
    api: LambdaClient, address: dict[str, Any]
):
    files_client = Address(address, http=HttpClient(transport=httpx.MockTransport(api.handle))).files
    names = [f"notes/{number}" for number in range(5)]
    for name in names:
        assert files_client.write(name, name.encode()) == {"key": name, "size": len(name)}
    files_client.write("other", b"\x00\xff")

    assert files_client.read("other") == b"\x00\xff"
    assert files_client.read("absent") is None
    first = files_client.list("notes/", limit=2)
    assert first == {"keys": names[:2], "next": names[1]}
    assert list(files_client.keys("notes/", page_size=2)) == list(files_client.keys("notes/")) == names
    assert (files_client.delete("other"), files_client.delete("other")) == (True, False)
    with pytest.raises(errors.InvalidRequest):
        files_client.write("bad\nkey", b"x")


def test_files_of_every_size_read_back_exactly_and_a_shorter_one_leaves_no_pieces(
    api: LambdaClient, address: dict[str, Any]
):
    sizes = [0, 1, 349_999, 350_001, files.MAX_FILE_BYTES, 200, 1_000_000]
    for number, size in enumerate(sizes):
        data = bytes([number]) * size
        write(api, address, "snapshots/latest.json", data)
        assert read(api, address, "snapshots/latest.json") == data
        assert pieces_stored(api, address, "snapshots/latest.json") == (0 if size <= 350_000 else -(-size // 350_000))


def test_keys_list_in_order_by_prefix_a_page_at_a_time_and_deleted_ones_go(api: LambdaClient, address: dict[str, Any]):
    names = ["a/2", "a/10", "a/é", "a/~", "b", "a", "a/big"]
    for name in names:
        write(api, address, name, b"x" * (1_000_000 if name == "a/big" else 10))

    assert listed(api, address)["keys"] == sorted(names)
    first = listed(api, address, "a/", limit=2)
    rest = listed(api, address, "a/", after=first["next"])
    deleted = call(api, address, "/delete", {"key": "a/2"}).json()
    again = call(api, address, "/delete", {"key": "a/2"}).json()

    assert first == {"keys": ["a/10", "a/2"], "next": "a/2"}
    assert rest == {"keys": ["a/big", "a/~", "a/é"], "next": None}
    assert (deleted, again) == ({"key": "a/2", "deleted": True}, {"key": "a/2", "deleted": False})
    assert read(api, address, "a/2") is None
    assert listed(api, address, "a/")["keys"] == ["a/10", "a/big", "a/~", "a/é"]
    assert call(api, address, "/delete", {"key": "a/big"}).json()["deleted"]
    assert pieces_stored(api, address, "a/big") == 0


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("", {"key": "", "data": ""}, 422, "invalid_request"),
        ("", {"key": "a\x00b", "data": ""}, 422, "invalid_request"),
        ("", {"key": "é" * 257, "data": ""}, 400, "invalid_request"),
        ("", {"key": "k", "data": "!!"}, 422, "invalid_request"),
        ("", {"key": "k", "data": "abc"}, 400, "invalid_request"),
        (
            "",
            {"key": "k", "data": base64.b64encode(b"\0" * (files.MAX_FILE_BYTES + 1)).decode()},
            422,
            "invalid_request",
        ),
        ("", {"key": "k", "data": "", "extra": 1}, 422, "invalid_request"),
        ("/read", {"key": "k\n"}, 422, "invalid_request"),
        ("/list", {"prefix": "b", "after": "a"}, 400, "invalid_request"),
        ("/list", {"after": "\U0001f600" * 300}, 400, "invalid_request"),
        ("/list", {"prefix": "\U0001f600" * 300}, 400, "invalid_request"),
        ("/read", {"key": "\U0001f600" * 300}, 400, "invalid_request"),
        ("/list", {"limit": 0}, 422, "invalid_request"),
        ("/delete", {}, 422, "invalid_request"),
    ],
)
def test_bad_requests_get_a_stable_code_and_change_nothing(
    api: LambdaClient, address: dict[str, Any], path: str, body: dict[str, Any], status: int, code: str
):
    write(api, address, "k", b"kept")

    reply = call(api, address, path, body)

    assert (reply.status, reply.error_code) == (status, code), reply.text
    assert listed(api, address)["keys"] == ["k"] and read(api, address, "k") == b"kept"


@pytest.mark.parametrize(
    ("path", "body"),
    [("", {"key": "k", "data": "c3RvbGVu"}), ("/read", {"key": "k"}), ("/delete", {"key": "k"}), ("/list", {})],
)
def test_another_addresss_token_is_refused_and_changes_nothing(
    api: LambdaClient, address: dict[str, Any], path: str, body: dict[str, Any]
):
    write(api, address, "k", b"kept")
    other = api.provision()

    for token in (other["credentials"]["read_token"], None):
        reply = call(api, address, path, body, token=token)
        assert (reply.status, reply.error_code) == (401, "unauthorized"), reply.text

    assert read(api, address, "k") == b"kept"


def test_an_address_stores_files_up_to_its_limit_and_a_write_past_it_changes_nothing(moto_env: None, clock: FakeClock):
    cost = ports.stored_bytes("a", 3000)
    api = LambdaClient.on_moto(clock, storage_max_bytes=3 * cost + 500)
    address = api.provision()
    for name in "abc":
        write(api, address, name, name.encode() * 3000)
    write(api, address, "c", b"C" * 3000)  # a replacement of the same size takes no more

    refused = call(api, address, "", {"key": "d", "data": base64.b64encode(b"d" * 3000).decode()})
    grown = call(api, address, "", {"key": "a", "data": base64.b64encode(b"A" * 4000).decode()})

    assert (refused.status, refused.error_code) == (413, "storage_limit_exceeded"), refused.text
    assert {name: refused.json()["error"][name] for name in ("max_bytes", "used_bytes", "needed_bytes")} == {
        "max_bytes": 3 * cost + 500,
        "used_bytes": 3 * cost,
        "needed_bytes": cost,
    }
    assert (grown.status, grown.error_code, grown.json()["error"]["needed_bytes"]) == (
        413,
        "storage_limit_exceeded",
        1000,
    )
    assert listed(api, address)["keys"] == ["a", "b", "c"] and read(api, address, "a") == b"a" * 3000

    # A smaller replacement and a delete give their room back.
    write(api, address, "a", b"A" * 2500)
    assert call(api, address, "/delete", {"key": "b"}).json()["deleted"]
    write(api, address, "d", b"d" * 3000)
    write(api, address, "e", b"e" * 500)
    assert listed(api, address)["keys"] == ["a", "c", "d", "e"]
    # Stored now: a and e 3,000 bytes less than a full file, c and d full: 435 bytes of room, not 465.
    refused = call(api, address, "", {"key": "f", "data": base64.b64encode(b"f" * 400).decode()})
    assert (refused.status, refused.json()["error"]["used_bytes"]) == (413, 4 * cost - 3000)
    write(api, address, "f", b"f" * 370)


def test_a_file_larger_than_the_whole_limit_is_refused_and_stores_nothing(moto_env: None, clock: FakeClock):
    api = LambdaClient.on_moto(clock, storage_max_bytes=1000)
    address = api.provision()

    refused = call(api, address, "", {"key": "big", "data": base64.b64encode(b"b" * 1000).decode()})

    assert (refused.status, refused.error_code) == (413, "storage_limit_exceeded"), refused.text
    assert "used_bytes" not in refused.json()["error"]
    assert listed(api, address)["keys"] == []
