"""Wire shapes of the file routes, used for validation and OpenAPI."""

from pydantic import ConfigDict, Field

from cairn.api.checkpoint_schemas import BASE64, TEXT
from cairn.api.schemas import Schema
from cairn.files import files

FileKey = Field(
    min_length=1,
    max_length=files.MAX_KEY_BYTES,
    pattern=TEXT,
    description=f"Any text without control characters, at most {files.MAX_KEY_BYTES} bytes as UTF-8; "
    "`/` has no meaning of its own.",
)


class FileWriteRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    key: str = FileKey
    data: str = Field(
        pattern=BASE64,
        max_length=-(-files.MAX_FILE_BYTES // 3) * 4,
        json_schema_extra={"contentEncoding": "base64"},
        description=f"The file's bytes, base64 (at most {files.MAX_FILE_BYTES}).",
    )


class FileKeyRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    key: str = FileKey


class FileOut(Schema):
    key: str
    size: int


class FileResponse(FileOut):
    data: str = Field(description="The file's bytes, base64.")


class FileDeletedResponse(Schema):
    key: str
    deleted: bool = Field(description="False when there was no file under the key.")


class FileListRequest(Schema):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    prefix: str = Field(default="", max_length=files.MAX_KEY_BYTES, pattern=TEXT, description="'' lists every file.")
    after: str | None = Field(
        default=None,
        min_length=1,
        max_length=files.MAX_KEY_BYTES,
        pattern=TEXT,
        description="The previous page's `next`.",
    )
    limit: int = Field(default=files.MAX_LIST, ge=1, le=files.MAX_LIST)


class FileListResponse(Schema):
    keys: list[str] = Field(description="Ascending, as their UTF-8 bytes sort (as Python sorts text).")
    next: str | None = Field(description="Set when more may follow: send it back as `after`.")
