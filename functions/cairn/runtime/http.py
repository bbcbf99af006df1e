"""`HttpRuntimeStore`: the runtime store contract over Cairn's HTTP API.

It raises the same exception classes as the in-process stores, rebuilt from
the service's error codes. Requests carry either the local runtime key as a
bearer token or an AWS SigV4 signature (API Gateway IAM authorization).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from cairn.runtime import wire
from cairn.runtime.errors import SENTINELS, ContractError, RuntimeStoreError, RuntimeStoreUnavailable
from cairn.runtime.methods import (
    METHODS,
    CreateSession,
    EndSession,
    RunRecordsQuery,
    RunRef,
    RunsBySession,
    SessionRecordsQuery,
    SessionRef,
    TranscriptQuery,
)
from cairn.runtime.model import (
    AppendResult,
    ChildRunStart,
    ChildRunStartResult,
    OneShotChildRunStart,
    OneShotChildRunStartResult,
    OneShotRunStart,
    OneShotRunStartResult,
    RootRunStart,
    RootRunStartResult,
    RunCancellation,
    RunMeta,
    RunRecord,
    RunRecordPage,
    RunRepairResult,
    RunStatus,
    RunSuspension,
    RunSuspensionCommand,
    RunTerminal,
    Session,
    SessionStatus,
)


class HttpRuntimeStore:
    def __init__(
        self,
        base_url: str,
        *,
        runtime_key: str | None = None,
        aws_credentials: Any = None,
        region: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`aws_credentials` (botocore credentials) and `region` turn on SigV4 signing."""
        self._base = base_url.rstrip("/") + "/api/v1/runtime/"
        self._key = runtime_key
        self._credentials = aws_credentials
        self._region = region
        self._client = httpx.Client(timeout=timeout, transport=transport)

    def close(self) -> None:
        self._client.close()

    def _invoke(self, name: str, request: Any) -> Any:
        method = METHODS[name]
        url = self._base + name
        body = json.dumps(wire.encode(request)).encode()
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        if self._credentials is not None:
            signed = AWSRequest(method="POST", url=url, data=body, headers=headers)
            SigV4Auth(self._credentials, "execute-api", self._region or "us-east-1").add_auth(signed)
            headers = dict(signed.headers.items())
        try:
            response = self._client.post(url, content=body, headers=headers)
        except httpx.HTTPError as error:
            raise RuntimeStoreUnavailable(f"runtime store unreachable: {error}") from error
        if response.is_success:
            return wire.decode(method.result, response.json())
        raise error_from(response)

    # -- sessions -------------------------------------------------------------

    def create_session(self, session_id: str, created_at: datetime) -> Session:
        return self._invoke("create_session", CreateSession(session_id, created_at))

    def load_session(self, session_id: str) -> Session:
        return self._invoke("load_session", SessionRef(session_id))

    def load_session_status(self, session_id: str) -> SessionStatus:
        return self._invoke("load_session_status", SessionRef(session_id)).status

    def end_session(self, session_id: str, ended_at: datetime) -> Session:
        return self._invoke("end_session", EndSession(session_id, ended_at))

    def purge_session(self, session_id: str) -> None:
        self._invoke("purge_session", SessionRef(session_id))

    def list_runs_by_session(self, session_id: str, statuses: Iterable[RunStatus] = ()) -> list[RunMeta]:
        return self._invoke("list_runs_by_session", RunsBySession(session_id, list(statuses))).runs

    # -- starts and records ---------------------------------------------------

    def start_root_run(self, command: RootRunStart) -> RootRunStartResult:
        return self._invoke("start_root_run", command)

    def start_child_run(self, command: ChildRunStart) -> ChildRunStartResult:
        return self._invoke("start_child_run", command)

    def start_one_shot_run(self, command: OneShotRunStart) -> OneShotRunStartResult:
        return self._invoke("start_one_shot_run", command)

    def start_one_shot_child_run(self, command: OneShotChildRunStart) -> OneShotChildRunStartResult:
        return self._invoke("start_one_shot_child_run", command)

    def append_run_record(self, record: RunRecord) -> AppendResult:
        return self._invoke("append_run_record", record)

    def record_run_cancellation(self, command: RunCancellation) -> AppendResult:
        return self._invoke("record_run_cancellation", command)

    def record_run_suspension(self, command: RunSuspensionCommand) -> AppendResult:
        return self._invoke("record_run_suspension", command)

    def record_run_terminal(self, command: RunTerminal) -> AppendResult:
        return self._invoke("record_run_terminal", command)

    def repair_run_suspension(self, command: RunSuspensionCommand) -> RunRepairResult:
        return self._invoke("repair_run_suspension", command)

    def repair_run_terminal(self, command: RunTerminal) -> RunRepairResult:
        return self._invoke("repair_run_terminal", command)

    # -- reads ----------------------------------------------------------------

    def load_run(self, run_id: str) -> RunMeta:
        return self._invoke("load_run", RunRef(run_id))

    def load_run_suspension(self, run_id: str) -> RunSuspension:
        return self._invoke("load_run_suspension", RunRef(run_id))

    def list_run_records(self, run_id: str, cursor: str = "", limit: int = 100) -> RunRecordPage:
        return self._invoke("list_run_records", RunRecordsQuery(run_id, cursor, limit))

    def list_session_run_records(self, session_id: str, cursor: str = "", limit: int = 100) -> RunRecordPage:
        return self._invoke("list_session_run_records", SessionRecordsQuery(session_id, cursor, limit))

    def list_run_transcript_records(
        self, run_id: str, through_record_id: str, after_record_id: str = "", limit: int = 512
    ) -> RunRecordPage:
        return self._invoke("list_run_transcript_records", TranscriptQuery(run_id, through_record_id, after_record_id, limit))


def error_from(response: httpx.Response) -> RuntimeStoreError:
    """The exception the service raised, rebuilt from its `{error: {code, message, contract}}`."""
    try:
        error = response.json()["error"]
        code, message, contract = error["code"], error.get("message", ""), bool(error.get("contract"))
    except (ValueError, KeyError, TypeError):
        return RuntimeStoreUnavailable(f"runtime store answered {response.status_code}")
    kind = SENTINELS.get(code)
    if contract:
        return ContractError(kind() if kind else message, message)
    if kind is not None:
        return kind(message)
    failure = RuntimeStoreError(message)
    failure.code = code
    return failure
