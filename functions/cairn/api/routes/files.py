"""Files of an address (read token): bytes under a key, what Strands' `Storage` (`CairnStorage`) calls.

Keys travel in bodies, never in paths, so a key may hold any text, `/` too.
"""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body

from cairn.api.checkpoint_presenters import decoded, encoded
from cairn.api.file_schemas import (
    FileDeletedResponse,
    FileKeyRequest,
    FileListRequest,
    FileListResponse,
    FileOut,
    FileResponse,
    FileWriteRequest,
)
from cairn.api.requests import bearer_token
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.addresses import BEARER
from cairn.services import Services

BASE = "/api/v1/addresses/<address_id>/files"
TAGS = ["files"]


def register(app: ConcurrentRestResolver, services: Services) -> None:
    # `services.files` is built on first use: read it per request.

    def token() -> str | None:
        return bearer_token(app.current_event)

    @app.post(
        BASE,
        summary="Write a file: its bytes under a key, replacing any file there whole",
        description="One commit: a reader finds the old bytes or the new, never a mix. The last write wins.",
        tags=TAGS,
        security=BEARER,
        status_code=201,
    )
    def write(address_id: str, body: Annotated[FileWriteRequest, Body()]) -> Response[FileOut]:
        data = decoded(body.data, "data")
        services.files.write(address_id, token(), body.key, data)
        answer = FileOut(key=body.key, size=len(data))
        return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=answer)

    @app.post(
        f"{BASE}/read",
        summary="Read a file (404 `not_found` when there is none)",
        tags=TAGS,
        security=BEARER,
    )
    def read(address_id: str, body: Annotated[FileKeyRequest, Body()]) -> FileResponse:
        data = services.files.read(address_id, token(), body.key)
        return FileResponse(key=body.key, size=len(data), data=encoded(data))

    @app.post(f"{BASE}/delete", summary="Delete a file; deleting none is no error", tags=TAGS, security=BEARER)
    def delete(address_id: str, body: Annotated[FileKeyRequest, Body()]) -> FileDeletedResponse:
        return FileDeletedResponse(key=body.key, deleted=services.files.delete(address_id, token(), body.key))

    @app.post(
        f"{BASE}/list",
        summary="List the keys that start with a prefix, in ascending order, a page at a time",
        tags=TAGS,
        security=BEARER,
    )
    def list_keys(address_id: str, body: Annotated[FileListRequest, Body()]) -> FileListResponse:
        page = services.files.list(address_id, token(), body.prefix, after=body.after, limit=body.limit)
        return FileListResponse(keys=list(page.keys), next=page.next)
