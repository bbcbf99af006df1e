"""Wire shapes of the LangGraph checkpoint routes, used for validation and OpenAPI."""

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from cairn.api.schemas import Schema
from cairn.checkpoints import threads

# Text without control characters (ids, namespaces, channels), as LangGraph forms them.
TEXT = r"^[^\x00-\x1f\x7f]*$"
CHECKPOINT_ID = r"^[A-Za-z0-9._:-]{1,128}$"
DIGEST = r"^[0-9a-f]{64}$"
BASE64 = r"^[A-Za-z0-9+/]*={0,2}$"
SERDE_TYPE = r"^[A-Za-z0-9._+/-]{1,64}$"
# Where an answer stopped: opaque, handed back as it came.
POSITION = r"^[A-Za-z0-9#._:+-]{1,600}$"
MAX_THREAD_ID = 512
MAX_NAMESPACE = 2048


def _base64_length(size: int) -> int:
    return -(-size // 3) * 4


ThreadId = Field(min_length=1, max_length=MAX_THREAD_ID, pattern=TEXT, description="LangGraph's `thread_id`.")
Namespace = Field(
    default="", max_length=MAX_NAMESPACE, pattern=TEXT, description="LangGraph's `checkpoint_ns` ('' at the root)."
)


class BlobIn(Schema):
    """A value as the saver's serializer made it (`dumps_typed`): its type, and its bytes inline or in parts."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    type: str = Field(pattern=SERDE_TYPE, description="The serializer's type tag, e.g. `msgpack`.")
    data: str | None = Field(
        default=None,
        pattern=BASE64,
        max_length=_base64_length(threads.MAX_INLINE_CHECKPOINT_BYTES),
        json_schema_extra={"contentEncoding": "base64"},
        description=f"The bytes, base64: at most {threads.MAX_INLINE_CHECKPOINT_BYTES} for a checkpoint, "
        f"{threads.MAX_INLINE_WRITE_BYTES} for a write. Larger values are uploaded as parts first.",
    )
    parts: list[Annotated[str, Field(pattern=DIGEST)]] | None = Field(
        default=None,
        min_length=1,
        max_length=threads.MAX_PARTS,
        description="Instead of `data`: the SHA-256 (hex) of each uploaded part, in order.",
    )
    size: int | None = Field(default=None, ge=1, description="With `parts`: the bytes in all.")

    @model_validator(mode="after")
    def _one_form(self) -> "BlobIn":
        if (self.data is None) == (self.parts is None):
            raise ValueError("give either data or parts")
        if self.parts is not None and self.size is None:
            raise ValueError("parts need their size")
        return self


class BlobOut(Schema):
    type: str
    data: str | None = Field(default=None, description="The bytes, base64, when stored inline.")
    parts: list[str] | None = Field(default=None, description="Else the parts to read, in order.")
    size: int


class CheckpointPutRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    thread_id: str = ThreadId
    checkpoint_ns: str = Namespace
    checkpoint_id: str = Field(pattern=CHECKPOINT_ID, description="The checkpoint's own id.")
    parent_id: str | None = Field(
        default=None,
        pattern=CHECKPOINT_ID,
        description="The checkpoint this one continues: the put commits only while it is the thread's head "
        "(else 409 `checkpoint_stale`).",
    )
    if_new_thread: bool = Field(
        default=False,
        description="Without `parent_id`: commit only if the thread has no checkpoint yet (else `checkpoint_stale`). "
        "Without either, the checkpoint starts a new line in the thread and becomes its head.",
    )
    checkpoint: BlobIn
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description=f"JSON metadata, filtered on by searches; at most {threads.MAX_METADATA_BYTES} bytes.",
    )


class CheckpointRefOut(Schema):
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str


class WriteIn(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    idx: int = Field(
        ge=-1000, le=1_000_000, description="The write's index in its task (LangGraph's special writes: < 0)."
    )
    channel: str = Field(min_length=1, max_length=256, pattern=TEXT)
    value: BlobIn


class WritesPutRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    thread_id: str = ThreadId
    checkpoint_ns: str = Namespace
    checkpoint_id: str = Field(pattern=CHECKPOINT_ID)
    task_id: str = Field(min_length=1, max_length=256, pattern=TEXT)
    task_path: str = Field(default="", max_length=MAX_NAMESPACE, pattern=TEXT)
    writes: list[WriteIn] = Field(min_length=1, max_length=threads.MAX_WRITES)


class WritesPutResponse(Schema):
    checkpoint_id: str
    task_id: str
    writes: int = Field(description="Writes sent; one stored before under its task and index kept its value.")


class WriteOut(Schema):
    task_id: str
    task_path: str
    idx: int
    channel: str
    value: BlobOut


class CheckpointOut(Schema):
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    checkpoint: BlobOut
    metadata: dict[str, Any]
    writes: list[WriteOut]
    more_writes: str | None = Field(
        description="Set when this answer had no room for every write: read the rest from "
        "`/checkpoints/writes/search` with `after` = this."
    )


class CheckpointSearchRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    thread_id: str | None = Field(
        default=None, min_length=1, max_length=MAX_THREAD_ID, pattern=TEXT, description="None: every thread."
    )
    checkpoint_ns: str | None = Field(
        default=None, max_length=MAX_NAMESPACE, pattern=TEXT, description="None: every namespace of the thread."
    )
    checkpoint_id: str | None = Field(default=None, pattern=CHECKPOINT_ID, description="That checkpoint only.")
    before: str | None = Field(default=None, pattern=CHECKPOINT_ID, description="Only checkpoints with lower ids.")
    filter: dict[str, Any] = Field(
        default_factory=dict, description="Metadata keys whose values must be equal (top-level keys)."
    )
    limit: int | None = Field(default=None, ge=1, le=1_000_000)
    after: str | None = Field(default=None, pattern=POSITION, description="The `next` of the previous page.")


class CheckpointSearchResponse(Schema):
    checkpoints: list[CheckpointOut] = Field(description="Newest first within each namespace.")
    next: str | None = Field(description="Set when more may follow: send it back as `after`.")


class WritesSearchRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    thread_id: str = ThreadId
    checkpoint_ns: str = Namespace
    checkpoint_id: str = Field(pattern=CHECKPOINT_ID)
    after: str = Field(pattern=POSITION, description="A checkpoint's `more_writes`, or the `next` of this route.")


class WritesSearchResponse(Schema):
    writes: list[WriteOut]
    next: str | None


class PartPutRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    thread_id: str = ThreadId
    data: str = Field(
        pattern=BASE64,
        max_length=_base64_length(threads.PART_BYTES),
        json_schema_extra={"contentEncoding": "base64"},
        description=f"The part's bytes, base64 (at most {threads.PART_BYTES}); its SHA-256 is the path's digest.",
    )


class PartOut(Schema):
    digest: str
    size: int


class PartResponse(PartOut):
    data: str = Field(description="The part's bytes, base64.")


class ThreadDeletedResponse(Schema):
    thread_id: str
    deleted: bool


class ThreadCopyRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    source_thread_id: str = ThreadId
    target_thread_id: str = Field(
        min_length=1,
        max_length=MAX_THREAD_ID,
        pattern=TEXT,
        description="A thread with no checkpoint yet (else 409 `checkpoint_thread_exists`).",
    )


class ThreadCopyResponse(Schema):
    source_thread_id: str
    target_thread_id: str
    copied: int = Field(description="Checkpoints copied, every namespace counted.")


class PruneRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    thread_ids: list[Annotated[str, Field(min_length=1, max_length=MAX_THREAD_ID, pattern=TEXT)]] = Field(
        min_length=1, max_length=threads.MAX_PRUNE_THREADS
    )
    strategy: Literal["keep_latest", "delete"] = Field(
        default="keep_latest",
        description="`keep_latest`: each namespace keeps its newest checkpoint and its writes, and the "
        "ancestors its `DeltaChannel`s are rebuilt from (back to where metadata "
        "`counters_since_delta_snapshot` names none); `delete`: the threads go whole.",
    )


class PruneResponse(Schema):
    threads: int
    removed: int = Field(description="Checkpoints removed by `keep_latest` (0 for `delete`).")


class RunsDeleteRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    run_ids: list[Annotated[str, Field(min_length=1, max_length=256, pattern=TEXT)]] = Field(
        min_length=1, max_length=threads.MAX_RUN_IDS, description="Metadata `run_id`s, as LangGraph records them."
    )


class RunsDeleteResponse(Schema):
    removed: int = Field(description="Checkpoints removed, in every thread of the address.")
