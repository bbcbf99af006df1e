"""An address's file storage limit on DynamoDB Local, under writers in processes of their own.

Each process writes, replaces and deletes files of one address through the
files use case; the limit admits exactly as many files as fit, never one
more, and afterwards the address's count of stored bytes equals what its
files take, counted file by file.
"""

from __future__ import annotations

import multiprocessing

from cairn.dynamodb import keys
from cairn.dynamodb.client import make_client
from cairn.dynamodb.items import get_int, key
from cairn.errors import StorageLimitExceeded
from cairn.files.ports import stored_bytes
from cairn.settings import Settings
from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, make_services

SIZE = 20_000
# Room for exactly FITTING files of SIZE bytes under keys of the same length.
FITTING = 7
PROCESSES = 4


def limit_for(fitting: int) -> int:
    return fitting * stored_bytes("p0-f0", SIZE) + stored_bytes("p0-f0", SIZE) - 1


def services(endpoint: str, table: str, limit: int):
    return make_services(clock=FakeClock(), table_name=table, dynamodb_endpoint=endpoint, files_max_bytes=limit)


def write_own_files(endpoint: str, table: str, limit: int, address_id: str, token: str, process: int) -> list[str]:
    """Writes four files of its own; the keys the limit let in."""
    files = services(endpoint, table, limit).files
    written = []
    for number in range(4):
        name = f"p{process}-f{number}"
        try:
            files.write(address_id, token, name, bytes([process]) * SIZE)
        except StorageLimitExceeded:
            continue
        written.append(name)
    return written


def churn(endpoint: str, table: str, limit: int, address_id: str, token: str, process: int) -> int:
    """Replaces and deletes its own two files in turn, at other sizes; how many writes the limit refused."""
    files = services(endpoint, table, limit).files
    refused = 0
    for round_number in range(12):
        name = f"p{process}-f{round_number % 2}"
        if round_number % 3 == 2:
            files.delete(address_id, token, name)
            continue
        try:
            files.write(address_id, token, name, b"x" * (SIZE // 2 + 997 * round_number))
        except StorageLimitExceeded:
            refused += 1
    return refused


def counted(endpoint: str, table: str, address_id: str) -> int:
    item = make_client(Settings(dynamodb_endpoint=endpoint)).get_item(
        TableName=table, Key=key(keys.address_pk(address_id), keys.STORAGE_USAGE), ConsistentRead=True
    )
    return get_int(item.get("Item") or {}, "stored_bytes")


def stored_now(api: LambdaClient, address_id: str, token: str) -> int:
    files = api.services.files
    names = files.list(address_id, token, "", after=None, limit=1000).keys
    return sum(stored_bytes(name, len(files.read(address_id, token, name))) for name in names)


def test_racing_processes_store_exactly_what_fits_and_the_count_is_what_is_stored(
    dynamodb_local, local_table: str, clock: FakeClock
):
    limit = limit_for(FITTING)
    api = LambdaClient(services(dynamodb_local.endpoint, local_table, limit))
    created = api.provision()
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    arguments = [
        (dynamodb_local.endpoint, local_table, limit, address_id, token, process) for process in range(PROCESSES)
    ]
    with multiprocessing.get_context("spawn").Pool(PROCESSES) as pool:
        written = [name for names in pool.starmap(write_own_files, arguments) for name in names]

    assert len(written) == FITTING  # sixteen tried, seven fit, never eight
    listed = api.services.files.list(address_id, token, "", after=None, limit=1000).keys
    assert sorted(listed) == sorted(written)
    assert counted(dynamodb_local.endpoint, local_table, address_id) == stored_now(api, address_id, token)

    with multiprocessing.get_context("spawn").Pool(PROCESSES) as pool:
        pool.starmap(churn, arguments)
    assert counted(dynamodb_local.endpoint, local_table, address_id) == stored_now(api, address_id, token)
    assert stored_now(api, address_id, token) <= limit
