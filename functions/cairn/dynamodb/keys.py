"""Key schema of the single table. Nothing else formats `pk`/`sk` values.

Sequences are zero-padded so that string order equals numeric order.

  A#<address>        META | STATE (usage) | S#<key> | I#<sha256(idempotency key)> | E#<seq> event
                     | OUT outbound counters | OC#<email> contact
                     | W#<subscription> wake-up subscription | WCOUNT subscription count
                     | T#<t>#<n>#<checkpoint> LangGraph checkpoint | T#<t>#<n>#<checkpoint>#W#<task>#<idx> its write
                     | TH#<t>#<n> thread head | TP#<t>#<sha256(part)> uploaded part
                       (<t> = sha256(thread id), <n> = sha256(checkpoint namespace), <task> = sha256(task id))
                     | AGS#<s> agent session head | AGS#<s>#<seq> its item | AGS#<s>#A#<sha256(add id)> add claim
                       (<s> = sha256(session id))
                     | RS#<s> Strands session | RS#<s>#A#<a> its agent's head | RS#<s>#A#<a>#M#<index> a message
                       | RS#<s>#X#<m> a multi-agent's state   (<a>, <m> = sha256(agent id, multi-agent id))
                     | LS#<l1>/<l2>/…/#<sha256(key)> LangGraph store item
                       (<l> = the first 32 hex digits of sha256(namespace label), one per label)
                     | FILE#<key> a file (its key as it is, so files list in key order)
                     | USAGE bytes its files and agent sessions store (`storage_usage`)
  WAKE#DUE           <due ms>#<address>#<subscription> scheduled delivery retry
  OUTCOME#DUE        <deadline ms>#<address>#<send seq> deadline of a send's reserved outcome slot
  S#<session>        META | P#<position> commit-ordered pointer | R#<run> membership
                     | Q#<run> initial history of the session
  R#<run>            META | E#<seq> record | K#<sha256(event key)> guard | CKPT checkpoint
                     | SEED seed head | SA#<a> attempt | SD#<a> declaration | SR#<a>#<seq> seed record
                     | SK#<a>#<sha256(key)> seed key guard   (<a> = sha256(attempt id))
  M#<agent>#<run>    META | E#<seq> memory event
  RL#<scope>#<who>   W#<window> rate counter | LAST latest use (a spacing rule)

A payload too large for one item is split into pieces at
`C#<sk of the item>#<n>` beside it (`payload_chunk_sk`). Items written
before that layout keep their pieces where they were (`legacy_*`): they are
read, never written.
"""

from __future__ import annotations

from cairn import credentials

SEQ_WIDTH = 12

META = "META"
STATE = "STATE"
CHECKPOINT = "CKPT"
STATE_PREFIX = "S"
EVENT_PREFIX = "E#"
POINTER_PREFIX = "P#"
MEMBER_PREFIX = "R#"


def _seq(sequence: int) -> str:
    return f"{sequence:0{SEQ_WIDTH}d}"


def upper_bound(prefix: str) -> str:
    """An `sk` above every key that starts with `prefix` (for range queries)."""
    return f"{prefix}~"


# -- addresses -------------------------------------------------------------------


def address_pk(address_id: str) -> str:
    return f"A#{address_id}"


def event_sk(sequence: int) -> str:
    """An address event, a run record and a memory event alike."""
    return f"{EVENT_PREFIX}{_seq(sequence)}"


def events_upper_bound() -> str:
    """An `sk` above every event of an address (for range queries)."""
    return upper_bound(EVENT_PREFIX)


def state_key_sk(state_key: str) -> str:
    """One item per state key; `STATE` (the usage counters) shares the `S` prefix."""
    return f"S#{state_key}"


def state_key_of(sk: str) -> str:
    return sk.removeprefix("S#")


def idempotency_sk(key_digest: str) -> str:
    return f"I#{key_digest}"


OUTBOUND = "OUT"
CONTACT_PREFIX = "OC#"


def contact_sk(email: str) -> str:
    """A contact of an address, under its lower-cased email."""
    return f"{CONTACT_PREFIX}{email}"


# -- runtime ---------------------------------------------------------------------


def session_pk(session_id: str) -> str:
    return f"S#{session_id}"


def run_pk(run_id: str) -> str:
    return f"R#{run_id}"


def guard_sk(event_key: str) -> str:
    return f"K#{credentials.digest(event_key)}"


def pointer_sk(position: int) -> str:
    return f"{POINTER_PREFIX}{_seq(position)}"


def position_of(sk: str) -> int:
    return int(sk.removeprefix(POINTER_PREFIX))


def member_sk(run_id: str) -> str:
    return f"{MEMBER_PREFIX}{run_id}"


def member_of(sk: str) -> str:
    return sk.removeprefix(MEMBER_PREFIX)


# -- initial history (seeds) -------------------------------------------------------

SEED_HEAD = "SEED"
SEED_MEMBER_PREFIX = "Q#"


def seed_member_sk(run_id: str) -> str:
    return f"{SEED_MEMBER_PREFIX}{run_id}"


def seed_member_of(sk: str) -> str:
    return sk.removeprefix(SEED_MEMBER_PREFIX)


def seed_attempt_sk(attempt_id: str) -> str:
    return f"SA#{credentials.digest(attempt_id)}"


def seed_declaration_sk(attempt_id: str) -> str:
    return f"SD#{credentials.digest(attempt_id)}"


def seed_record_sk(attempt_id: str, sequence: int) -> str:
    return f"SR#{credentials.digest(attempt_id)}#{_seq(sequence)}"


def seed_guard_sk(attempt_id: str, key: str) -> str:
    return f"SK#{credentials.digest(attempt_id)}#{credentials.digest(key)}"


# -- memory, rate limits -----------------------------------------------------------


def memory_pk(agent_id: str, run_id: str) -> str:
    """Product memory of one agent run (ids never contain `#`); events use `event_sk`."""
    return f"M#{agent_id}#{run_id}"


def provision_claim_pk(key_digest: str) -> str:
    """Which address a provisioning `Idempotency-Key` made (its digest; the key is never stored)."""
    return f"PROVISION#{key_digest}"


def rate_pk(scope: str, subject: str) -> str:
    """Fixed-window counters, e.g. creations per client IP."""
    return f"RL#{scope}#{subject}"


def rate_sk(window: int) -> str:
    """One fixed window: its number counts windows (a minute, a day) since the epoch."""
    return f"W#{window}"


# Under `rate_pk`: when the subject last acted, for rules of spacing rather than of counts.
RATE_LAST = "LAST"


def client_pk(client: str) -> str:
    """What one client (an IP address, or an IPv6 /64) holds across every address."""
    return f"CLIENT#{client}"


# Under `client_pk`: the reads the client holds open (`cairn.dynamodb.read_leases`).
HELD_READS = "HELD"


# -- pieces of large payloads ----------------------------------------------------


def payload_chunk_prefix(parent_sk: str) -> str:
    """Where the pieces of the payload of item `parent_sk` sit, outside every other range."""
    return f"C#{parent_sk}#"


def payload_chunk_sk(parent_sk: str, index: int) -> str:
    return f"{payload_chunk_prefix(parent_sk)}{index:03d}"


def legacy_event_chunk_prefix(sequence: int) -> str:
    """Pieces of address events and run records written before `payload_chunk_sk`."""
    return f"C#{_seq(sequence)}#"


def legacy_memory_chunk_prefix(sequence: int) -> str:
    """Pieces of memory events written before `payload_chunk_sk`: right after the event."""
    return f"{event_sk(sequence)}#"


LEGACY_CHECKPOINT_CHUNK_PREFIX = "CK#"


# -- LangGraph checkpoints (in the address partition) ----------------------------

CHECKPOINT_PREFIX = "T#"
_WRITES_MARK = "#W#"


def _thread(thread_id: str) -> str:
    return credentials.digest(thread_id)


def thread_checkpoints_prefix(thread_id: str | None) -> str:
    """Every checkpoint and write of a thread (None: of every thread of the address)."""
    return CHECKPOINT_PREFIX if thread_id is None else f"{CHECKPOINT_PREFIX}{_thread(thread_id)}#"


def namespace_checkpoints_prefix(thread_id: str, checkpoint_ns: str) -> str:
    """The checkpoints of one namespace of a thread, in checkpoint id order, each followed by its writes.

    Checkpoint ids hold no `#`, which sorts below every character they may
    hold, so a checkpoint's writes come right after it and before any other.
    """
    return f"{thread_checkpoints_prefix(thread_id)}{credentials.digest(checkpoint_ns)}#"


def checkpoint_sk(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    return f"{namespace_checkpoints_prefix(thread_id, checkpoint_ns)}{checkpoint_id}"


def checkpoint_writes_prefix(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    return f"{checkpoint_sk(thread_id, checkpoint_ns, checkpoint_id)}{_WRITES_MARK}"


def checkpoint_write_sk(thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str, index: int) -> str:
    """One write of a task; LangGraph's special writes have negative indexes."""
    return (
        f"{checkpoint_writes_prefix(thread_id, checkpoint_ns, checkpoint_id)}{credentials.digest(task_id)}#{index:+05d}"
    )


def thread_head_sk(thread_id: str, checkpoint_ns: str) -> str:
    """Which checkpoint a thread's namespace is at: the condition of every put."""
    return f"TH#{_thread(thread_id)}#{credentials.digest(checkpoint_ns)}"


def thread_heads_prefix(thread_id: str) -> str:
    return f"TH#{_thread(thread_id)}#"


def thread_part_sk(thread_id: str, part_digest: str) -> str:
    """An uploaded part of a large checkpoint or write, under the SHA-256 of its bytes."""
    return f"{thread_parts_prefix(thread_id)}{part_digest}"


def thread_parts_prefix(thread_id: str) -> str:
    return f"TP#{_thread(thread_id)}#"


def thread_part_pieces_prefix(thread_id: str) -> str:
    """The pieces of every part of a thread (`payload_chunk_sk` of each part's item)."""
    return f"C#{thread_parts_prefix(thread_id)}"


# -- LangGraph's long-term store (in the address partition) -------------------------

STORE_PREFIX = "LS#"
# 128 bits of a label's SHA-256: unique enough within one address, short enough for 16 labels in one `sk`.
_LABEL_DIGITS = 32


def store_namespace_prefix(namespace: tuple[str, ...]) -> str:
    """Every store item in `namespace` or below it (the empty namespace: every item of the address).

    Each label is hashed on its own, so a namespace prefix is a key prefix
    and a search or a namespace listing under it is one range read.
    """
    return STORE_PREFIX + "".join(f"{credentials.digest(label)[:_LABEL_DIGITS]}/" for label in namespace)


def store_item_sk(namespace: tuple[str, ...], key: str) -> str:
    """One item of a namespace; `#` sorts below the digits, so a namespace's own items come before its children's."""
    return f"{store_namespace_prefix(namespace)}#{credentials.digest(key)}"


# -- agent sessions (in the address partition) -------------------------------------

# Not `S`: state's listing reads every `sk` that starts with it.
AGENT_SESSION_PREFIX = "AGS#"


def agent_session_sk_base(session_id: str) -> str:
    """Where a session's rows sit: items (digits), then its head (`H`), its pops' claims (`P`), its adds' (`R`)."""
    return f"{AGENT_SESSION_PREFIX}{credentials.digest(session_id)}#"


def agent_session_head_sk(session_id: str) -> str:
    """A session's head: its last sequence, item count and version, the condition of every change.

    It sorts right above the session's items, so one query read newest first meets the head and then
    the newest items: a pop or a read of the latest items is one query.
    """
    return f"{agent_session_sk_base(session_id)}H"


def agent_session_item_sk(session_id: str, sequence: int) -> str:
    """One item, in sequence order below its head; its pieces at `payload_chunk_sk` of this."""
    return f"{agent_session_sk_base(session_id)}{_seq(sequence)}"


def agent_session_add_sk(session_id: str, add_id: str) -> str:
    """The claim of one add under the id its client gave it: above the head, out of the items' range."""
    return f"{agent_session_sk_base(session_id)}R#{credentials.digest(add_id)}"


def agent_session_pop_sk(session_id: str, pop_id: str) -> str:
    """The claim of one pop under the id its client gave it, holding the item it took (pieces beside it)."""
    return f"{agent_session_sk_base(session_id)}P#{credentials.digest(pop_id)}"


# -- Strands sessions (in the address partition) ------------------------------------

# Not `S` (state's listing) and not `AGS#`: a Strands session is a repository of its own.
STRANDS_SESSION_PREFIX = "RS#"


def strands_session_sk(session_id: str) -> str:
    """A Strands session's record; its agents and their messages sort right after it."""
    return f"{STRANDS_SESSION_PREFIX}{credentials.digest(session_id)}"


def strands_record_sk(session_id: str, kind: str, record_id: str) -> str:
    """The head of an agent (`kind` `A`: its state, version, message count, writer) or of a multi-agent (`X`)."""
    return f"{strands_session_sk(session_id)}#{kind}#{credentials.digest(record_id)}"


def strands_message_sk(session_id: str, agent_id: str, message_id: int) -> str:
    """One message of an agent, in index order; its pieces at `payload_chunk_sk` of this."""
    return f"{strands_record_sk(session_id, 'A', agent_id)}#M#{_seq(message_id)}"


# -- wake-up subscriptions ---------------------------------------------------------

SUBSCRIPTION_PREFIX = "W#"
# Under the address: how many subscriptions it has (the limit is a condition on it).
SUBSCRIPTION_COUNT = "WCOUNT"
# One partition of scheduled retries, sorted by due time (only failing targets are in it).
WAKE_DUE_PK = "WAKE#DUE"


def subscription_sk(subscription_id: str) -> str:
    return f"{SUBSCRIPTION_PREFIX}{subscription_id}"


def _due_at(at: float) -> str:
    """The start of an `sk` in a partition sorted by due time: epoch milliseconds, 15 digits."""
    return f"{round(at * 1000):015d}"


def wake_due_sk(at: float, address_id: str, subscription_id: str) -> str:
    return f"{_due_at(at)}#{address_id}#{subscription_id}"


def due_upper_bound(now: float) -> str:
    """An `sk` above every item due at or before `now` (`WAKE#DUE`, `OUTCOME#DUE`)."""
    return f"{_due_at(now)}~"


# -- outbound mail outcomes --------------------------------------------------------

# One partition of the deadlines of reserved outcome slots, sorted by deadline (one per send awaiting its outcome).
OUTCOME_DUE_PK = "OUTCOME#DUE"


def outcome_due_sk(at: float, address_id: str, send_sequence: int, attempt: int = 1) -> str:
    # A later hand-off attempt of the same send is its own slot, so its own item even at the same instant.
    suffix = f"#{attempt}" if attempt > 1 else ""
    return f"{_due_at(at)}#{address_id}#{_seq(send_sequence)}{suffix}"


def address_of_event_key(pk: str, sk: str) -> tuple[str, int] | None:
    """(address id, sequence) when `pk`/`sk` are an address event's key, else None."""
    if not pk.startswith("A#") or not sk.startswith(EVENT_PREFIX):
        return None
    digits = sk.removeprefix(EVENT_PREFIX)
    return (pk.removeprefix("A#"), int(digits)) if digits.isdigit() else None


# Files of an address (`cairn.files`): a key's text follows the prefix as it is, so they sort as keys do.
FILE_PREFIX = "FILE#"
# Not under `S`: the state's own items are read by that prefix.
STORAGE_USAGE = "USAGE"


def file_sk(file_key: str) -> str:
    return f"{FILE_PREFIX}{file_key}"
