"""LangGraph checkpoints of an address (read token): what `CairnSaver` calls.

Thread ids and namespaces travel in bodies and query strings, never in
paths, so any text LangGraph uses reaches the store as it is.
"""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from cairn import jsontext
from cairn.api import checkpoint_presenters as presenters
from cairn.api.checkpoint_schemas import (
    MAX_THREAD_ID,
    TEXT,
    CheckpointPutRequest,
    CheckpointRefOut,
    CheckpointSearchRequest,
    CheckpointSearchResponse,
    PartOut,
    PartPutRequest,
    PartResponse,
    PruneRequest,
    PruneResponse,
    RunsDeleteRequest,
    RunsDeleteResponse,
    ThreadCopyRequest,
    ThreadCopyResponse,
    ThreadDeletedResponse,
    WritesPutRequest,
    WritesPutResponse,
    WritesSearchRequest,
    WritesSearchResponse,
)
from cairn.api.requests import bearer_token
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.addresses import BEARER
from cairn.checkpoints.models import NewCheckpoint, Search
from cairn.services import Services

BASE = "/api/v1/addresses/<address_id>/checkpoints"
TAGS = ["checkpoints"]


def register(app: ConcurrentRestResolver, services: Services) -> None:
    # `services.checkpoints` is built on first use: read it per request.

    def token() -> str | None:
        return bearer_token(app.current_event)

    @app.post(
        BASE,
        summary="Put a checkpoint: the thread's new head",
        description="Commits the checkpoint and moves its thread's head to it together, only while the head "
        "is still `parent_id` (or, with `if_new_thread`, while the thread has none): a writer that another "
        "overtook gets 409 `checkpoint_stale` with the current `head`, and nothing is stored. Sending the same "
        "put again after it committed answers the same. Values over the inline limit are uploaded as parts first.",
        tags=TAGS,
        security=BEARER,
        status_code=201,
    )
    def put(address_id: str, body: Annotated[CheckpointPutRequest, Body()]) -> Response[CheckpointRefOut]:
        checkpoint = NewCheckpoint(
            thread_id=body.thread_id,
            checkpoint_ns=body.checkpoint_ns,
            checkpoint_id=body.checkpoint_id,
            parent_id=body.parent_id,
            if_new_thread=body.if_new_thread,
            checkpoint=presenters.blob_in(body.checkpoint, "checkpoint"),
            metadata_json=jsontext.canonical(body.metadata),
        )
        services.checkpoints.put(address_id, token(), checkpoint)
        answer = CheckpointRefOut(
            thread_id=body.thread_id, checkpoint_ns=body.checkpoint_ns, checkpoint_id=body.checkpoint_id
        )
        return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=answer)

    @app.post(
        f"{BASE}/writes",
        summary="Store a task's pending writes against a checkpoint",
        description="All or none; a write (index 0 or more) already stored under its task and index keeps its "
        "first value, so a repeated call stores nothing twice. LangGraph's special writes (negative indexes) "
        "are replaced.",
        tags=TAGS,
        security=BEARER,
    )
    def put_writes(address_id: str, body: Annotated[WritesPutRequest, Body()]) -> WritesPutResponse:
        writes = presenters.writes_in(body)
        services.checkpoints.put_writes(
            address_id,
            token(),
            thread_id=body.thread_id,
            checkpoint_ns=body.checkpoint_ns,
            checkpoint_id=body.checkpoint_id,
            writes=writes,
        )
        return WritesPutResponse(checkpoint_id=body.checkpoint_id, task_id=body.task_id, writes=len(writes))

    @app.post(
        f"{BASE}/search",
        summary="List checkpoints with their pending writes, newest first",
        description="By thread (or every thread), namespace, id, `before` an id, and metadata `filter`; "
        "as many as fit one answer, then `next`.",
        tags=TAGS,
        security=BEARER,
    )
    def search(address_id: str, body: Annotated[CheckpointSearchRequest, Body()]) -> CheckpointSearchResponse:
        query = Search(
            thread_id=body.thread_id,
            checkpoint_ns=body.checkpoint_ns,
            checkpoint_id=body.checkpoint_id,
            before=body.before,
            metadata=body.filter,
            limit=body.limit,
            after=body.after,
        )
        page = services.checkpoints.search(address_id, token(), query)
        return CheckpointSearchResponse(
            checkpoints=[presenters.checkpoint_out(checkpoint) for checkpoint in page.checkpoints], next=page.next
        )

    @app.post(
        f"{BASE}/writes/search",
        summary="The rest of a checkpoint's pending writes",
        description="For a checkpoint answered with `more_writes`: the writes after it, as many as fit, then `next`.",
        tags=TAGS,
        security=BEARER,
    )
    def search_writes(address_id: str, body: Annotated[WritesSearchRequest, Body()]) -> WritesSearchResponse:
        page = services.checkpoints.writes(
            address_id,
            token(),
            thread_id=body.thread_id,
            checkpoint_ns=body.checkpoint_ns,
            checkpoint_id=body.checkpoint_id,
            after=body.after,
        )
        return WritesSearchResponse(writes=[presenters.write_out(write) for write in page.writes], next=page.next)

    @app.put(
        f"{BASE}/parts/<digest>",
        summary="Upload one part of a large checkpoint or write",
        description="`digest` is the SHA-256 (hex) of the bytes; a checkpoint or write then names its parts, "
        "and commits only if every one is there. Uploading a part again is harmless.",
        tags=TAGS,
        security=BEARER,
        status_code=201,
    )
    def put_part(address_id: str, digest: str, body: Annotated[PartPutRequest, Body()]) -> Response[PartOut]:
        data = presenters.decoded(body.data, "data")
        services.checkpoints.put_part(address_id, token(), thread_id=body.thread_id, digest=digest, data=data)
        answer = PartOut(digest=digest, size=len(data))
        return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=answer)

    @app.get(f"{BASE}/parts/<digest>", summary="Read one uploaded part", tags=TAGS, security=BEARER)
    def read_part(
        address_id: str,
        digest: str,
        thread_id: Annotated[str, Query(min_length=1, max_length=MAX_THREAD_ID, pattern=TEXT)],
    ) -> PartResponse:
        data = services.checkpoints.read_part(address_id, token(), thread_id=thread_id, digest=digest)
        return PartResponse(digest=digest, size=len(data), data=presenters.encoded(data))

    @app.delete(
        BASE,
        summary="Delete a thread: its checkpoints, writes and parts in every namespace",
        tags=TAGS,
        security=BEARER,
    )
    def delete_thread(
        address_id: str,
        thread_id: Annotated[str, Query(min_length=1, max_length=MAX_THREAD_ID, pattern=TEXT)],
    ) -> ThreadDeletedResponse:
        services.checkpoints.delete_thread(address_id, token(), thread_id)
        return ThreadDeletedResponse(thread_id=thread_id, deleted=True)

    @app.post(
        f"{BASE}/copy",
        summary="Copy a thread to a new thread id: every namespace, checkpoint, pending write and part",
        description="The target's heads are written last, so no put continues a half-made copy; a target that "
        "has checkpoints already gets 409 `checkpoint_thread_exists`. Sending a copy again after it failed midway "
        "finishes it. The source is unchanged.",
        tags=TAGS,
        security=BEARER,
    )
    def copy_thread(address_id: str, body: Annotated[ThreadCopyRequest, Body()]) -> ThreadCopyResponse:
        copied = services.checkpoints.copy_thread(
            address_id, token(), source=body.source_thread_id, target=body.target_thread_id
        )
        return ThreadCopyResponse(
            source_thread_id=body.source_thread_id, target_thread_id=body.target_thread_id, copied=copied
        )

    @app.post(
        f"{BASE}/prune",
        summary="Prune threads: keep each namespace's newest checkpoint, or delete them whole",
        description="Each checkpoint goes with its writes in one commit, checked against its thread's head, "
        "so a writer continuing the newest checkpoint is never undone.",
        tags=TAGS,
        security=BEARER,
    )
    def prune(address_id: str, body: Annotated[PruneRequest, Body()]) -> PruneResponse:
        removed = services.checkpoints.prune(address_id, token(), thread_ids=body.thread_ids, strategy=body.strategy)
        return PruneResponse(threads=len(set(body.thread_ids)), removed=removed)

    @app.post(
        f"{BASE}/runs/delete",
        summary="Delete the checkpoints of runs (metadata `run_id`) in every thread",
        description="Each goes with its writes in one commit; a thread whose head goes has it moved to the "
        "newest checkpoint it keeps, in the same commit.",
        tags=TAGS,
        security=BEARER,
    )
    def delete_for_runs(address_id: str, body: Annotated[RunsDeleteRequest, Body()]) -> RunsDeleteResponse:
        return RunsDeleteResponse(removed=services.checkpoints.delete_for_runs(address_id, token(), body.run_ids))
