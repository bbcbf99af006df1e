"""Items of agent sessions: heads and conversation items (attribute names live here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from cairn import credentials
from cairn.checkpoints.models import Owner
from cairn.dynamodb import blobs, keys
from cairn.dynamodb.checkpoint_items import expiry
from cairn.dynamodb.items import get_int, get_s, key, n, s

Item = dict[str, Any]

_VERSION = "version"
ADD_DIGEST = "digest"
# How long a pop's claim keeps the item it took, for a retry of that pop.
POP_CLAIM_SECONDS = 86_400
# What a row counts against its address's storage limit beyond the JSON it holds: its key (digests and a
# sequence) and attributes, so that even empty items, heads and claims are bounded in number.
ROW_OVERHEAD = 128


def item_bytes(size: int) -> int:
    """What an item whose JSON is `size` bytes as answered counts against its address's storage limit."""
    return size + ROW_OVERHEAD


@dataclass(frozen=True)
class Stage:
    """A change too large for one commit (a replacement of every item, or an add) written ahead of the commit
    that makes its rows the session's items: they hold sequences `base + 1 .. last`, above every live item,
    where no read looks, and count `size` bytes.

    `until`: while the change's writer holds it (epoch seconds); after, any writer may drop it.
    """

    stage_id: str
    base: int
    last: int
    size: int
    until: int

    @property
    def written(self) -> int:
        """How many items its rows hold so far."""
        return self.last - self.base


@dataclass(frozen=True)
class Head:
    """A session's head as read: items `floor + 1 .. last_seq` are the live ones, `count` of them, but for those
    it hides (`hides`)."""

    last_seq: int = 0
    floor: int = 0
    count: int = 0
    version: int = 0  # 0: no head stored yet
    expires_at: float | None = None  # the address's, which every row of the session carries
    stored_bytes: int = 0  # what the live items count (`item_bytes`)
    held_bytes: int = 0  # what popped items kept for their pops' retries count, until `held_until`
    held_until: int = 0
    stage: Stage | None = None
    # Writes of the head that changed nothing a reader sees (a stage's opening, rows and dropping): `version`
    # counts them, as the condition of every write must, but the session's version (`visible_version`) does not.
    quiet_writes: int = 0
    # The newest items a replacement of some of them put others above, hidden in its commit and deleted after:
    # the sequences `hidden_low + 1 .. hidden_high` (none while `hidden_high` is 0).
    hidden_low: int = 0
    hidden_high: int = 0

    def hides(self, sequence: int) -> bool:
        return self.hidden_low < sequence <= self.hidden_high

    @property
    def visible_version(self) -> int:
        """The session's version as reads answer it and replacements name it: moved by each change of its items."""
        return self.version - self.quiet_writes

    def added(self, items: int, size: int) -> Head:
        return replace(
            self,
            last_seq=self.last_seq + items,
            count=self.count + items,
            stored_bytes=self.stored_bytes + size,
            version=self.version + 1,
        )

    def popped(self, size: int, *, held_until: int | None) -> Head:
        """One item of `size` counted bytes gone; kept until `held_until` by its pop's claim, if it has one."""
        # A head written before bytes were counted has none to give back.
        freed = min(size, self.stored_bytes)
        popped = replace(self, count=self.count - 1, stored_bytes=self.stored_bytes - freed, version=self.version + 1)
        if held_until is None:
            return popped
        return replace(popped, held_bytes=self.held_bytes + freed, held_until=max(self.held_until, held_until))

    def cleared(self) -> Head:
        """Every item hidden under the floor (with any a replacement hid)."""
        return replace(
            self, floor=self.last_seq, count=0, stored_bytes=0, version=self.version + 1, hidden_low=0, hidden_high=0
        )

    def replaced(
        self, removed: int | None, removed_bytes: int, items: int, size: int, *, hiding_from: int | None = None
    ) -> Head:
        """`items` new ones of `size` counted bytes in place of the newest `removed` (None: every item, which
        the floor then hides, as a clear does), which counted `removed_bytes`. Replacing some, the new ones go
        above them; with `hiding_from` (the oldest one's sequence), the head hides them up to the last, rather
        than the commit deleting them. Rows hidden before are gone by then: the head no longer hides them."""
        if removed is None:
            return replace(self.cleared(), last_seq=self.last_seq + items, count=items, stored_bytes=size)
        kept = self.stored_bytes - min(removed_bytes, self.stored_bytes)
        new = replace(self.added(items, size), count=self.count - removed + items, stored_bytes=kept + size)
        if hiding_from is None:
            return replace(new, hidden_low=0, hidden_high=0)
        return replace(new, hidden_low=hiding_from - 1, hidden_high=self.last_seq)

    def unhidden(self) -> Head:
        """The rows it hid deleted: nothing left to pass by."""
        return replace(self, hidden_low=0, hidden_high=0)._quietly_written()

    def staging(self, stage_id: str, base: int, until: int) -> Head:
        """A replacement's stage opened above `base`, held until `until`; none of its rows written yet."""
        return replace(self, stage=Stage(stage_id, base, base, 0, until))._quietly_written()

    def staged(self, items: int, size: int, *, until: int | None = None) -> Head:
        """`items` more rows of `size` counted bytes written to the open stage; held until `until`, if given."""
        assert self.stage is not None
        stage = replace(self.stage, last=self.stage.last + items, size=self.stage.size + size)
        if until is not None:
            stage = replace(stage, until=until)
        return replace(self, stage=stage)._quietly_written()

    def flipped(self) -> Head:
        """The stage's rows made the session's items, every item below them hidden, as a clear hides them: the
        stage appended to a session emptied up to its base, which the floor hides, so nothing is left to pass by."""
        assert self.stage is not None
        emptied = replace(self, floor=self.stage.base, last_seq=self.stage.base, count=0, stored_bytes=0)
        return replace(emptied.appended(), hidden_low=0, hidden_high=0)

    def appended(self) -> Head:
        """The stage's rows made the newest items, after every live one. The sequences between, where no item
        lives but rows of a stage dropped before may remain, are hidden until they are deleted after the commit
        (and rows hidden before are gone by then)."""
        assert self.stage is not None
        stage = self.stage
        return replace(
            self,
            last_seq=stage.last,
            count=self.count + stage.written,
            stored_bytes=self.stored_bytes + stage.size,
            stage=None,
            version=self.version + 1,
            hidden_low=self.last_seq,
            hidden_high=stage.base,
        )

    def unstaged(self) -> Head:
        """The stage dropped: its rows are left to delete, and no longer count."""
        return replace(self, stage=None)._quietly_written()

    def _quietly_written(self) -> Head:
        return replace(self, version=self.version + 1, quiet_writes=self.quiet_writes + 1)

    def lapsed(self, now: float) -> Head:
        """The head without what it counts past its time: the pop claims' bytes once all of them have expired,
        and a stage its writer no longer holds (`lapsed_stage`), whose rows are then left to delete."""
        head = replace(self, held_bytes=0, held_until=0) if self.held_bytes and now >= self.held_until else self
        return replace(head, stage=None) if head.lapsed_stage(now) else head

    def lapsed_stage(self, now: float) -> Stage | None:
        return self.stage if self.stage is not None and now >= self.stage.until else None

    def counted(self, session_id: str) -> int:
        """What the session's head and items count against the address's storage limit (claims apart)."""
        if self.version == 0:
            return 0
        staged = self.stage.size if self.stage else 0
        return len(session_id.encode()) + ROW_OVERHEAD + self.stored_bytes + self.held_bytes + staged


def head_from(item: Item | None) -> Head:
    if item is None:
        return Head()
    expires_at = float(item["expires_at"]["N"]) if "expires_at" in item else None
    stage_id = get_s(item, _STAGE_ID)
    stored_bytes, held_bytes, held_until = (get_int(item, name) for name in _COUNTS)
    return Head(
        get_int(item, "last_seq"),
        get_int(item, "floor"),
        get_int(item, "count"),
        get_int(item, _VERSION),
        expires_at,
        stored_bytes,
        held_bytes,
        held_until,
        None if stage_id is None else Stage(stage_id, *(get_int(item, name) for name in _STAGE)),
        get_int(item, _QUIET_WRITES),
        *(get_int(item, name) for name in _HIDDEN),
    )


_COUNTS = ("stored_bytes", "held_bytes", "held_until")
# A stage's attributes on the head, present only while one is open: its id, then `Stage`'s numbers in order.
_STAGE_ID = "stage_id"
_STAGE = ("stage_base", "stage_last", "stage_bytes", "stage_until")
_QUIET_WRITES = "quiet_writes"  # present once there was one
_HIDDEN = ("hidden_low", "hidden_high")  # present while some items are hidden


def head_put(table: str, owner: Owner, session_id: str, seen: Head, new: Head) -> Item:
    """The head moved from `seen` to `new`, only while it is still `seen` (or, for a first add, still absent)."""
    put: Item = {
        "TableName": table,
        "Item": {
            **key(keys.address_pk(owner.address_id), keys.agent_session_head_sk(session_id)),
            "session_id": s(session_id),
            "last_seq": n(new.last_seq),
            "floor": n(new.floor),
            "count": n(new.count),
            _VERSION: n(new.version),
            **{name: n(getattr(new, name)) for name in _COUNTS},
            **_stage_attributes(new.stage),
            **({_QUIET_WRITES: n(new.quiet_writes)} if new.quiet_writes else {}),
            **({name: n(getattr(new, name)) for name in _HIDDEN} if new.hidden_high else {}),
            **expiry(owner),
        },
    }
    if seen.version == 0:
        put["ConditionExpression"] = "attribute_not_exists(pk)"
    else:
        put["ConditionExpression"] = "#version = :seen"
        put["ExpressionAttributeNames"] = {"#version": _VERSION}
        put["ExpressionAttributeValues"] = {":seen": n(seen.version)}
    return {"Put": put}


def _stage_attributes(stage: Stage | None) -> Item:
    if stage is None:
        return {}
    numbers = (stage.base, stage.last, stage.size, stage.until)
    return {_STAGE_ID: s(stage.stage_id), **{name: n(value) for name, value in zip(_STAGE, numbers, strict=True)}}


def item_puts(table: str, owner: Owner, session_id: str, sequence: int, text: str, size: int) -> list[Item]:
    """The item's `Put`, then its pieces' when its text is larger than one item holds."""
    pk = keys.address_pk(owner.address_id)
    sk = keys.agent_session_item_sk(session_id, sequence)
    payload, pieces = blobs.split(pk, sk, text.encode(), text=True, **expiry(owner))
    item = {**key(pk, sk), "seq": n(sequence), "size": n(size), **payload, **expiry(owner)}
    return [{"Put": {"TableName": table, "Item": piece}} for piece in [item, *pieces]]


def add_claim(table: str, owner: Owner, session_id: str, client_id: str, digest: str) -> Item:
    """The claim of one add or replacement under the id its client gave it, with the digest of what it
    wrote (`added_digest`, `replaced_digest`), stored once: a retry of a change that committed finds it and
    writes nothing, and another change under the same id finds another digest."""
    claim_key = key(keys.address_pk(owner.address_id), keys.agent_session_add_sk(session_id, client_id))
    return {"Put": {"TableName": table, "Item": {**claim_key, ADD_DIGEST: s(digest), **expiry(owner)}, **_UNCLAIMED}}


def no_claim(table: str, address_id: str, session_id: str, client_id: str) -> Item:
    """A check that no change committed under the id yet, failing, as the claim's put does, with the claim found."""
    claim_key = key(keys.address_pk(address_id), keys.agent_session_add_sk(session_id, client_id))
    return {"ConditionCheck": {"TableName": table, "Key": claim_key, **_UNCLAIMED}}


_UNCLAIMED = {"ConditionExpression": "attribute_not_exists(pk)", "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


def added_digest(items: Sequence[str]) -> str:
    """What an add's items are, whatever their number: canonical JSON texts hold no raw line break."""
    return credentials.digest("\n".join(items))


# What an add sent in parts is to its claim: its add_id alone, which each part carries, so that any of its parts
# sent again after the last one committed finds the add made (a request holds a part, never the whole add).
PARTED_ADD_DIGEST = credentials.digest("an add sent in parts")


def replaced_digest(items: Sequence[str], newest: int | None, version: int | None) -> str:
    """What a replacement is: its items, how many of the newest it replaces and the version it expects.
    Never an add's digest, so one id cannot serve an add and a replacement."""
    return added_digest([f"replace {newest} {version}", *items])


def same_claim(claim: Item | None, digest: str) -> bool:
    """Whether a stored claim was made with this digest; claims from before digests were kept count as the same."""
    stored = (claim or {}).get(ADD_DIGEST)
    return stored is None or stored["S"] == digest


def pop_claim_puts(table: str, owner: Owner, session_id: str, pop_id: str, text: str, *, now: float) -> list[Item]:
    """The pop's claim holding the item it takes, stored once (its pieces after it when large).

    A retry of a pop whose answer was lost finds it and answers the same item.
    It is kept `POP_CLAIM_SECONDS` (a retry comes within that), never past the address.
    """
    pk = keys.address_pk(owner.address_id)
    sk = keys.agent_session_pop_sk(session_id, pop_id)
    until = int(now) + POP_CLAIM_SECONDS
    expires_at = n(until if owner.expires_at is None else min(until, int(owner.expires_at)))
    payload, pieces = blobs.split(pk, sk, text.encode(), text=True, expires_at=expires_at)
    claim = {
        "TableName": table,
        "Item": {**key(pk, sk), **payload, "expires_at": expires_at},
        "ConditionExpression": "attribute_not_exists(pk)",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    return [{"Put": claim}, *({"Put": {"TableName": table, "Item": piece}} for piece in pieces)]


def item_deletes(table: str, item: Item) -> list[Item]:
    """Deletes of a stored item and its pieces."""
    pk, sk = item["pk"]["S"], item["sk"]["S"]
    pieces = [keys.payload_chunk_sk(sk, index) for index in range(get_int(item, blobs.PIECES))]
    return [{"Delete": {"TableName": table, "Key": key(pk, each)}} for each in [sk, *pieces]]


def size_of(item: Item) -> int:
    return get_int(item, "size")


def counted_bytes(item: Item) -> int:
    """What a stored item counts against its address's storage limit."""
    return item_bytes(size_of(item))
