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


# Compared against when there is no address, so an unknown id costs what a wrong token does.
_NO_ADDRESS_DIGEST = credentials.digest("no address has this token")


def admit(record: AddressRecord | None, read_token: str | None, *, now: float) -> AddressRecord:
    """`record` if it is live and the token opens it; the one refusal otherwise.

    The token is hashed and compared whatever else fails, so the refusal
    takes the same work for an unknown, expired or deleted address as for
    a wrong token.
    """
    opens = credentials.matches(read_token or "", record.read_token_digest if record else _NO_ADDRESS_DIGEST)
    if record is None or not read_token or not record.is_live(now) or not opens:
        raise Unauthorized()
    return record


def is_live(table: AddressStore, address_id: str, *, now: float) -> bool:
    """Whether an address exists and has not expired (for trusted internal callers, not a credential check)."""
    record = table.load(address_id)
    return record is not None and record.is_live(now)
