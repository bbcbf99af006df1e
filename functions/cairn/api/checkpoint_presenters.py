"""Between the checkpoint routes' wire shapes and the checkpoint use case's objects, both ways."""

from __future__ import annotations

import base64
import binascii

from cairn.api import checkpoint_schemas as schemas
from cairn.checkpoints.models import Blob, StoredCheckpoint, Write
from cairn.errors import InvalidRequest


def blob_in(value: schemas.BlobIn, field: str) -> Blob:
    if value.parts is not None:
        return Blob(type=value.type, parts=tuple(value.parts), size=value.size or 0)
    return Blob(type=value.type, data=decoded(value.data or "", field))


def decoded(text: str, field: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise InvalidRequest("Not valid base64.", field=field) from error


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def writes_in(request: schemas.WritesPutRequest) -> list[Write]:
    return [
        Write(
            task_id=request.task_id,
            index=write.idx,
            channel=write.channel,
            value=blob_in(write.value, f"writes.{position}.value"),
            task_path=request.task_path,
        )
        for position, write in enumerate(request.writes)
    ]


def blob_out(blob: Blob) -> schemas.BlobOut:
    if blob.data is not None:
        return schemas.BlobOut(type=blob.type, data=encoded(blob.data), size=len(blob.data))
    return schemas.BlobOut(type=blob.type, parts=list(blob.parts), size=blob.size)


def write_out(write: Write) -> schemas.WriteOut:
    return schemas.WriteOut(
        task_id=write.task_id,
        task_path=write.task_path,
        idx=write.index,
        channel=write.channel,
        value=blob_out(write.value),
    )


def checkpoint_out(checkpoint: StoredCheckpoint) -> schemas.CheckpointOut:
    return schemas.CheckpointOut(
        thread_id=checkpoint.thread_id,
        checkpoint_ns=checkpoint.checkpoint_ns,
        checkpoint_id=checkpoint.checkpoint_id,
        parent_id=checkpoint.parent_id,
        checkpoint=blob_out(checkpoint.checkpoint),
        metadata=checkpoint.metadata,
        writes=[write_out(write) for write in checkpoint.writes],
        more_writes=checkpoint.more_writes,
    )
