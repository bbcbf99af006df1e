"""Who may touch an address: the read token, checked in constant time."""

from __future__ import annotations

from cairn import credentials
from cairn.addresses.models import AddressRecord
from cairn.addresses.ports import AddressStore
from cairn.errors import Unauthorized


def authenticate(table: AddressStore, address_id: str, read_token: str | None, *, now: float) -> AddressRecord:
    """The live address this token opens; one identical refusal otherwise.

    Unknown, expired, deleted and wrong-token cases are indistinguishable,
    so the answer never tells a prober which ids exist.
    """
    require_well_formed(address_id)
    return admit(table.load(address_id) if read_token else None, read_token, now=now)


def require_well_formed(address_id: str) -> None:
    """The refusal for an id that no address can have, before it reaches storage.

    DynamoDB rejects oversized keys with a validation error; answering as for
    an unknown id keeps the one refusal and never becomes a 500.
    """
    if not credentials.is_address_id(address_id):
        raise Unauthorized()


def admit(record: AddressRecord | None, read_token: str | None, *, now: float) -> AddressRecord:
    """`record` if it is live and the token opens it; the one refusal otherwise."""
    if (
        record is None
        or not read_token
        or not record.is_live(now)
        or not credentials.matches(read_token, record.read_token_digest)
    ):
        raise Unauthorized()
    return record
